package view

import (
	"errors"
	"maps"
	"strings"
	"testing"

	"github.com/hotreload/hotreload/internal/revision"
)

func TestChoose(t *testing.T) {
	var (
		stableSum = revision.Sum([]revision.File{{Path: "a", Data: []byte("stable")}})
		candSum   = revision.Sum([]revision.File{{Path: "a", Data: []byte("candidate")}})
		newerSum  = revision.Sum([]revision.File{{Path: "a", Data: []byte("newer edit")}})
	)
	stableOnly := &revision.Rollout{Source: "configmap/app", Stable: revision.NewPin("100", stableSum)}
	rolling := &revision.Rollout{Source: "configmap/app", Stable: revision.NewPin("100", stableSum),
		Candidate: &revision.Pin{Revision: "200", SHA256: revision.Hex(candSum)}}

	tests := []struct {
		name string
		in   Input
		want Choice
	}{
		// Rule 2: no stable content.
		{"standalone", Input{SourceOK: true, SourceSum: candSum}, Choice{From: Source}},
		{"standalone, annotated", Input{Want: "200", SourceOK: true}, Choice{From: Source}},
		{"standalone, source unreadable", Input{}, Choice{From: Keep, Why: "the source volume cannot be read"}},
		{"stable volume without reserved key", Input{HasStable: true, Want: "200", SourceOK: true}, Choice{From: Source}},
		// Rule 3: stable.
		{"never annotated", Input{HasStable: true, Rollout: rolling, StableSum: stableSum, SourceOK: true, SourceSum: candSum},
			Choice{From: Stable, Revision: "100"}},
		{"pinned to stable", Input{Want: "100", HasStable: true, Rollout: rolling, StableSum: stableSum, SourceOK: true, SourceSum: candSum},
			Choice{From: Stable, Revision: "100"}},
		{"stable, source unreadable", Input{HasStable: true, Rollout: stableOnly, StableSum: stableSum},
			Choice{From: Stable, Revision: "100"}},
		{"stable volume not refreshed yet", Input{HasStable: true, Rollout: stableOnly, StableSum: candSum, SourceOK: true},
			Choice{From: Keep, Why: "the stable volume does not hold stable revision 100 yet"}},
		// Rule 4: candidate.
		{"candidate", Input{Want: "200", HasStable: true, Rollout: rolling, StableSum: stableSum, SourceOK: true, SourceSum: candSum},
			Choice{From: Source, Revision: "200"}},
		// Rule 5: wait.
		{"source not refreshed yet", Input{Want: "200", HasStable: true, Rollout: rolling, StableSum: stableSum, SourceOK: true, SourceSum: stableSum},
			Choice{From: Keep, Why: "the source volume does not hold candidate revision 200 yet"}},
		{"source moved on to an edit not yet approved", Input{Want: "200", HasStable: true, Rollout: rolling, StableSum: stableSum, SourceOK: true, SourceSum: newerSum},
			Choice{From: Keep, Why: "the source volume does not hold candidate revision 200 yet"}},
		{"candidate, source unreadable", Input{Want: "200", HasStable: true, Rollout: rolling, StableSum: stableSum},
			Choice{From: Keep, Why: "the source volume does not hold candidate revision 200 yet"}},
		{"stable volume has no candidate yet", Input{Want: "200", HasStable: true, Rollout: stableOnly, StableSum: stableSum, SourceOK: true, SourceSum: candSum},
			Choice{From: Keep, Why: "revision 200 is neither the stable revision (100) nor the candidate (none)"}},
		{"an old candidate", Input{Want: "150", HasStable: true, Rollout: rolling, StableSum: stableSum, SourceOK: true, SourceSum: candSum},
			Choice{From: Keep, Why: "revision 150 is neither the stable revision (100) nor the candidate (200)"}},
		{"reserved key does not parse", Input{HasStable: true, RolloutErr: errors.New("bad"), SourceOK: true},
			Choice{From: Keep, Why: "the stable copy's .hotreload-rollout.json does not parse: bad"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Choose(tt.in); got != tt.want {
				t.Errorf("Choose = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestParseAnnotations(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want map[string]string
		err  string
	}{
		{"empty", "", map[string]string{}, ""},
		{"as the kubelet writes it", `hotreload.dev/revisions="{\"configmap/app\":\"81234\"}"` + "\n" + `kubernetes.io/config.seen="2026-11-25T10:00:00Z"`,
			map[string]string{RevisionsAnnotation: `{"configmap/app":"81234"}`, "kubernetes.io/config.seen": "2026-11-25T10:00:00Z"}, ""},
		{"trailing newline", "a=\"1\"\n", map[string]string{"a": "1"}, ""},
		{"escapes", `note="line 1\nline 2 \u00e9 \\ \t"`, map[string]string{"note": "line 1\nline 2 é \\ \t"}, ""},
		{"empty value", `a=""`, map[string]string{"a": ""}, ""},
		{"equals sign in value", `a="x=y"`, map[string]string{"a": "x=y"}, ""},
		{"unquoted", `a=1`, nil, `line 1: a: the value is not a quoted string`},
		{"backquoted", "a=`1`", nil, `line 1: a: the value is not a quoted string`},
		{"trailing garbage", `a="1" x`, nil, `line 1: a: the value is not a quoted string`},
		{"no equals", `a`, nil, `line 1: want key="value"`},
		{"blank line", "a=\"1\"\n\nb=\"2\"", nil, `line 2: want key="value"`},
		{"bad key", `-a="1"`, nil, `line 1: "-a" is not an annotation key`},
		{"name of 63 characters", "p.io/" + strings.Repeat("n", 63) + `="1"`, map[string]string{"p.io/" + strings.Repeat("n", 63): "1"}, ""},
		{"name of 64 characters", strings.Repeat("n", 64) + `="1"`, nil, "is not an annotation key"},
		{"name ending in a dot", `a.="1"`, nil, "is not an annotation key"},
		{"bad prefix", `Hotreload.dev/x="1"`, nil, `line 1: "Hotreload.dev/x" is not an annotation key`},
		{"twice", "a=\"1\"\na=\"2\"", nil, `line 2: a given twice`},
		{"too big", strings.Repeat("x", maxAnnotationsSize+1), nil, "larger than"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseAnnotations([]byte(tt.in))
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("ParseAnnotations = %v, %v, want an error with %q", got, err, tt.err)
				}
				return
			}
			if err != nil || !maps.Equal(got, tt.want) {
				t.Fatalf("ParseAnnotations = %v, %v, want %v", got, err, tt.want)
			}
		})
	}
}

func TestRevisions(t *testing.T) {
	tests := []struct {
		name string
		in   map[string]string
		want map[string]string
		err  string
	}{
		{"none", map[string]string{"other": "x"}, map[string]string{}, ""},
		{"two refs", map[string]string{RevisionsAnnotation: `{"configmap/app":"1","secret/db.creds":"2"}`},
			map[string]string{"configmap/app": "1", "secret/db.creds": "2"}, ""},
		{"empty object", map[string]string{RevisionsAnnotation: `{}`}, map[string]string{}, ""},
		{"not json", map[string]string{RevisionsAnnotation: `{"configmap/app":`}, nil, "hotreload.dev/revisions: not a JSON object"},
		{"not strings", map[string]string{RevisionsAnnotation: `{"configmap/app":1}`}, nil, "want a JSON object of strings"},
		{"null", map[string]string{RevisionsAnnotation: `null`}, nil, "not null"},
		{"bad ref", map[string]string{RevisionsAnnotation: `{"deployment/app":"1"}`}, nil, `ref "deployment/app": want configmap/NAME or secret/NAME`},
		{"empty revision", map[string]string{RevisionsAnnotation: `{"configmap/app":""}`}, nil, "configmap/app: the revision is empty"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Revisions(tt.in)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("Revisions = %v, %v, want an error with %q", got, err, tt.err)
				}
				return
			}
			if err != nil || !maps.Equal(got, tt.want) {
				t.Fatalf("Revisions = %v, %v, want %v", got, err, tt.want)
			}
		})
	}
}

func TestParseRef(t *testing.T) {
	for in, want := range map[string]string{
		"configmap/app-config":                  "",
		"secret/a.b-c":                          "",
		"configmap/":                            `is not a ConfigMap or Secret name`,
		"configmap/App":                         `is not a ConfigMap or Secret name`,
		"configmap/a/b":                         `is not a ConfigMap or Secret name`,
		"ConfigMap/app":                         "want configmap/NAME or secret/NAME",
		"app":                                   "want configmap/NAME or secret/NAME",
		"configmap/" + strings.Repeat("a", 254): "is not a ConfigMap or Secret name",
	} {
		r, err := ParseRef(in)
		switch {
		case want == "" && (err != nil || r.String() != in):
			t.Errorf("ParseRef(%q) = %v, %v", in, r, err)
		case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
			t.Errorf("ParseRef(%q) = %v, want an error with %q", in, err, want)
		}
	}
}

func TestExpand(t *testing.T) {
	env := map[string]string{"HOST": "db.local", "PORT": "5432", "EMPTY": "", "_x1": "y"}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	tests := []struct {
		name, in, want, err string
	}{
		{"plain", "no refs here", "no refs here", ""},
		{"refs", "url: $(HOST):$(PORT)/$(_x1)", "url: db.local:5432/y", ""},
		{"set but empty", "a: '$(EMPTY)'", "a: ''", ""},
		{"escaped", "literal $$(HOST) and $(HOST)", "literal $(HOST) and db.local", ""},
		{"not references", "$HOST $ $$ $$$ $( $() $(1A) $(A-B) $(HOST", "$HOST $ $$ $$$ $( $() $(1A) $(A-B) $(HOST", ""},
		{"dollar before ref", "$$$(HOST)", "$$(HOST)", ""},
		{"at the end", "x$", "x$", ""},
		{"missing", "$(NOPE) $(HOST) $(ALSO_NOPE) $(NOPE)", "", "expand app.yaml: $(ALSO_NOPE), $(NOPE) are not set in hotreload's environment"},
		{"one missing", "$(NOPE)", "", "expand app.yaml: $(NOPE) is not set in hotreload's environment"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := []revision.File{{Path: "app.yaml", Data: []byte(tt.in)}, {Path: "raw.txt", Data: []byte(tt.in)}}
			out, err := Expand(in, []string{"*.yaml"}, lookup)
			if tt.err != "" {
				if err == nil || err.Error() != tt.err {
					t.Fatalf("Expand = %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if string(out[0].Data) != tt.want {
				t.Errorf("app.yaml = %q, want %q", out[0].Data, tt.want)
			}
			if string(out[1].Data) != tt.in {
				t.Errorf("raw.txt, which no glob names, = %q, want it unchanged", out[1].Data)
			}
			if string(in[0].Data) != tt.in {
				t.Errorf("Expand changed its argument")
			}
		})
	}
	if err := CheckGlob("[a-"); err == nil {
		t.Error("CheckGlob accepted a bad pattern")
	}
}
