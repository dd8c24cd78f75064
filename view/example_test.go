package view_test

import (
	"fmt"
	"strings"

	"github.com/hotreload/hotreload/internal/revision"
	"github.com/hotreload/hotreload/view"
)

func ExampleChoose() {
	stable := revision.Sum([]revision.File{{Path: "app.yaml", Data: []byte("replicas: 1")}})
	candidate := revision.Sum([]revision.File{{Path: "app.yaml", Data: []byte("replicas: 2")}})
	rollout := revision.Rollout{Source: "configmap/app", Stable: revision.NewPin("100", stable)}
	pin := revision.NewPin("200", candidate)
	rollout.Candidate = &pin

	annotations, _ := view.ParseAnnotations([]byte(`hotreload.dev/revisions="{\"configmap/app\":\"200\"}"`))
	revs, _ := view.Revisions(annotations)
	for _, in := range []view.Input{
		{HasStable: true, Rollout: &rollout, StableSum: stable, SourceOK: true, SourceSum: candidate},                              // never annotated
		{Want: revs["configmap/app"], HasStable: true, Rollout: &rollout, StableSum: stable, SourceOK: true, SourceSum: stable},    // the kubelet has not refreshed the source yet
		{Want: revs["configmap/app"], HasStable: true, Rollout: &rollout, StableSum: stable, SourceOK: true, SourceSum: candidate}, // now it has
	} {
		c := view.Choose(in)
		fmt.Printf("want %q: %s\n", in.Want, strings.TrimSpace(fmt.Sprintf("run %s %s %s", c.From, c.Revision, c.Why)))
	}
	// Output:
	// want "": run stable 100
	// want "200": run keep  the source volume does not hold candidate revision 200 yet
	// want "200": run source 200
}
