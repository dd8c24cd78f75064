package notifier

import (
	"errors"
	"fmt"
	"testing"
)

func TestRefused(t *testing.T) {
	base := errors.New("POST http://app/-/reload: status 500, want 200: yaml: line 3: bad")
	err := fmt.Errorf("reload: %w", errors.Join(errors.New("other target"), Refused(base, "POST http://app/-/reload: status 500")))
	if !errors.Is(err, ErrRefused) || !errors.Is(err, base) {
		t.Errorf("%v: want it to match ErrRefused and its cause", err)
	}
	if reason, ok := RefusedReason(err); !ok || reason != "POST http://app/-/reload: status 500" {
		t.Errorf("RefusedReason = %q, %v", reason, ok)
	}
	if got := Refused(base, "x").Error(); got != base.Error() {
		t.Errorf("Error = %q, want the cause's text", got)
	}
	if errors.Is(base, ErrRefused) {
		t.Error("an unmarked error matches ErrRefused")
	}
	if _, ok := RefusedReason(base); ok {
		t.Error("an unmarked error has a refusal reason")
	}
}
