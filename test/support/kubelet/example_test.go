package kubelet_test

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/hotreload/hotreload/test/support/kubelet"
)

func ExampleVolume_Write() {
	root, err := os.MkdirTemp("", "kubelet-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(root)

	v := kubelet.New(filepath.Join(root, "config"))
	for _, color := range []string{"blue", "blue", "green"} {
		changed, err := v.Write(map[string]kubelet.File{
			"app.properties":      {Data: []byte("color=" + color + "\n")},
			"conf.d/default.conf": {Data: []byte("listen 80;\n")},
		})
		if err != nil {
			panic(err)
		}
		data, err := os.ReadFile(filepath.Join(v.Dir, "app.properties"))
		if err != nil {
			panic(err)
		}
		link, err := os.Readlink(filepath.Join(v.Dir, "conf.d"))
		if err != nil {
			panic(err)
		}
		fmt.Printf("changed=%v conf.d -> %s app.properties: %s", changed, link, data)
	}
	// Output:
	// changed=true conf.d -> ..data/conf.d app.properties: color=blue
	// changed=false conf.d -> ..data/conf.d app.properties: color=blue
	// changed=true conf.d -> ..data/conf.d app.properties: color=green
}
