package e2etest

import (
	"net/http"
	"testing"
)

func TestAppDownAndUp(t *testing.T) {
	app := NewApp(t)
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	post := func() (int, error) {
		resp, err := client.Post(app.URL("/-/reload"), "", nil)
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	if code, err := post(); err != nil || code != http.StatusOK {
		t.Fatalf("POST = %d, %v; want 200", code, err)
	}
	app.Down()
	if _, err := post(); err == nil {
		t.Fatalf("POST to an app that is down succeeded")
	}
	app.Up()
	app.FailNext(1, "bad config")
	if code, _ := post(); code != http.StatusInternalServerError {
		t.Errorf("POST after FailNext = %d, want 500", code)
	}
	if code, _ := post(); code != http.StatusOK {
		t.Errorf("second POST after FailNext(1) = %d, want 200", code)
	}
	if got := app.Count(); got != 3 {
		t.Errorf("Count = %d, want 3 (the refused one is not received)", got)
	}
	if got := app.Completed(http.StatusOK); got != 2 {
		t.Errorf("Completed(200) = %d, want 2", got)
	}
}
