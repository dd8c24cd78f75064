package controller

import (
	"bytes"
	"io"
	"strings"
	"testing"

	"github.com/go-kit/log"
)

func TestKlogLogger(t *testing.T) {
	tests := []struct {
		name string
		sink func(log.Logger) func() // returns a function that logs three lines
		want []string
	}{
		{"klog.SetLogger's: levels kept", func(l log.Logger) func() {
			lg := KlogLogger(l).WithName("leaderelection").WithValues("lock", "ns/name")
			return func() {
				lg.Info("successfully acquired lease")
				lg.V(4).Info("renewed")
				lg.Error(io.EOF, "watch failed")
			}
		}, []string{
			`level=info logger=leaderelection lock=ns/name msg="successfully acquired lease"`,
			`level=debug logger=leaderelection lock=ns/name msg=renewed`,
			`level=error logger=leaderelection lock=ns/name msg="watch failed" err=EOF`,
		}},
		{"the controller's calls: all at debug", func(l log.Logger) func() {
			lg := clientGoLogger(l).WithName("leaderelection")
			return func() {
				lg.Info("successfully acquired lease")
				lg.V(4).Info("renewed")
				lg.Error(io.EOF, "watch failed")
			}
		}, []string{
			`level=debug component=client-go logger=leaderelection msg="successfully acquired lease"`,
			`level=debug component=client-go logger=leaderelection msg=renewed`,
			`level=debug component=client-go logger=leaderelection msg="watch failed" err=EOF`,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			tt.sink(log.NewLogfmtLogger(&buf))()
			got := buf.String()
			if n := strings.Count(got, "\n"); n != len(tt.want) {
				t.Errorf("%d lines, want %d:\n%s", n, len(tt.want), got)
			}
			for _, want := range tt.want {
				if !strings.Contains(got, want) {
					t.Errorf("log lacks %q:\n%s", want, got)
				}
			}
		})
	}
}
