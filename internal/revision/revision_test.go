package revision

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/hotreload/hotreload/test/support/kubelet"
)

// TestSumFormat pins the byte stream of the sum, which the controller and
// the sidecar must write alike: a change of the format fails here.
func TestSumFormat(t *testing.T) {
	files := []File{{Path: "b", Data: []byte("xy")}, {Path: "a", Data: nil}, {Path: "conf.d/c", Data: bytes.Repeat([]byte{'z'}, 200)}}
	var stream []byte
	stream = append(stream, 1, 'a', 0)
	stream = append(stream, 1, 'b', 2, 'x', 'y')
	stream = append(stream, 8)
	stream = append(stream, "conf.d/c"...)
	stream = append(stream, 0xc8, 0x01) // 200 as a uvarint
	stream = append(stream, bytes.Repeat([]byte{'z'}, 200)...)
	if got, want := Sum(files), sha256.Sum256(stream); got != want {
		t.Fatalf("Sum = %x, want %x", got, want)
	}
	// A known answer, computed apart (Python hashlib), for implementations
	// outside this package.
	const golden = "af473534bd9fca260e069772da77213104f6b54f9d7645e2c4e8e45a054e69c3"
	if got := Hex(ConfigMapSum(map[string]string{"app.yaml": "color: blue\n", "empty": ""}, map[string][]byte{"logo.png": {0x89, 'P', 'N', 'G'}})); got != golden {
		t.Errorf("ConfigMapSum = %s, want %s", got, golden)
	}
}

func TestSumTellsContentApart(t *testing.T) {
	cases := map[string][2][]File{
		"path and content boundary": {{{Path: "a", Data: []byte("bc")}}, {{Path: "ab", Data: []byte("c")}}},
		"entry boundary":            {{{Path: "a", Data: []byte("")}, {Path: "b", Data: []byte("")}}, {{Path: "a", Data: []byte{0, 1, 'b', 0}}}},
		"empty value and no key":    {{{Path: "a", Data: []byte("")}}, nil},
		"one byte":                  {{{Path: "a", Data: []byte("x")}}, {{Path: "a", Data: []byte("y")}}},
		"renamed key":               {{{Path: "a", Data: []byte("x")}}, {{Path: "b", Data: []byte("x")}}},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			if Sum(c[0]) == Sum(c[1]) {
				t.Errorf("%v and %v have the same sum", c[0], c[1])
			}
		})
	}
}

func TestSumIgnoresOrderModesAndReservedKey(t *testing.T) {
	a := []File{{Path: "x", Data: []byte("1"), Mode: 0o644}, {Path: "y", Data: []byte("2")}}
	b := []File{{Path: "y", Data: []byte("2"), Mode: 0o400}, {Path: ReservedKey, Data: []byte("{}")}, {Path: "x", Data: []byte("1")}}
	if Sum(a) != Sum(b) {
		t.Errorf("same content, other order, modes and the reserved key: sums differ")
	}
	if !slices.Equal(paths(a), []string{"x", "y"}) {
		t.Errorf("Sum changed its argument")
	}
}

// TestVolumeAgreesWithObject is the contract between the controller and
// the sidecar: a volume that the kubelet writes from an object's data has
// the sum the object's data maps have.
func TestVolumeAgreesWithObject(t *testing.T) {
	rollout := Rollout{Source: "configmap/app", Stable: NewPin("7", Sum(nil))}.Marshal()
	t.Run("configmap", func(t *testing.T) {
		data := map[string]string{"app.yaml": "color: blue\n", "empty": "", "unicode.txt": "grüße ✓\n", ReservedKey: string(rollout)}
		binaryData := map[string][]byte{"logo.png": {0x89, 'P', 'N', 'G', 0, 0xff}, "zero": {}}
		payload := map[string]kubelet.File{}
		for k, v := range data {
			payload[k] = kubelet.File{Data: []byte(v)}
		}
		for k, v := range binaryData {
			payload[k] = kubelet.File{Data: v}
		}
		v := writeVolume(t, payload)
		if got, want := v.Sum(), ConfigMapSum(data, binaryData); got != want {
			t.Errorf("volume sum %x, ConfigMap sum %x", got, want)
		}
		if got, want := paths(v.Files), []string{"app.yaml", "empty", "logo.png", "unicode.txt", "zero"}; !slices.Equal(got, want) {
			t.Errorf("files %v, want %v", got, want)
		}
		if !bytes.Equal(v.Reserved, rollout) {
			t.Errorf("reserved key %q, want %q", v.Reserved, rollout)
		}
		if got := ConfigMapSum(data, binaryData); got != ConfigMapSum(map[string]string{"app.yaml": "color: blue\n", "empty": "", "unicode.txt": "grüße ✓\n"}, binaryData) {
			t.Errorf("the reserved key counts in the ConfigMap's sum")
		}
	})
	t.Run("secret", func(t *testing.T) {
		data := map[string][]byte{"password": []byte("s3cr3t"), "empty": {}, ReservedKey: rollout}
		payload := map[string]kubelet.File{}
		for k, v := range data {
			payload[k] = kubelet.File{Data: v, Mode: 0o400}
		}
		v := writeVolume(t, payload)
		if got, want := v.Sum(), SecretSum(data); got != want {
			t.Errorf("volume sum %x, Secret sum %x", got, want)
		}
		for _, f := range v.Files {
			if f.Mode != 0o400 {
				t.Errorf("%s: mode %v, want 0400 as written", f.Path, f.Mode)
			}
		}
	})
	t.Run("without reserved key", func(t *testing.T) {
		v := writeVolume(t, map[string]kubelet.File{"a": {Data: []byte("1")}})
		if v.Reserved != nil {
			t.Errorf("reserved %q, want nil", v.Reserved)
		}
	})
}

// TestReadVolumeNeverMixes reads a volume while the kubelet keeps swapping
// it: every read is one version in full.
func TestReadVolumeNeverMixes(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "vol")
	kv := kubelet.New(dir)
	version := func(i int) map[string]kubelet.File {
		p := map[string]kubelet.File{}
		for _, k := range []string{"a", "b", "c", "d/e"} {
			p[k] = kubelet.File{Data: []byte(strings.Repeat(k, i%7+1) + string(rune('0'+i%10)))}
		}
		if i%3 == 0 {
			p["extra"] = kubelet.File{Data: []byte("x")} // a key that comes and goes
		}
		return p
	}
	sums := map[[32]byte]bool{}
	for i := range 30 {
		var files []File
		for k, f := range version(i) {
			files = append(files, File{Path: k, Data: f.Data})
		}
		sums[Sum(files)] = true
	}
	if _, err := kv.Write(version(0)); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	done := make(chan struct{})
	wg.Go(func() {
		defer close(done)
		for i := 1; i < 30; i++ {
			if _, err := kv.Write(version(i)); err != nil {
				t.Error(err)
				return
			}
		}
	})
	reads := 0
	for {
		select {
		case <-done:
			wg.Wait()
			if reads == 0 {
				t.Fatal("no read made")
			}
			return
		default:
		}
		v, err := ReadVolume(dir)
		if err != nil {
			<-done // the writer must be done before the directory goes
			t.Fatalf("read %d: %v", reads, err)
		}
		if !sums[v.Sum()] {
			<-done
			t.Fatalf("read %d: %v is no version that was written", reads, paths(v.Files))
		}
		reads++
	}
}

func TestReadVolumePlainDirectory(t *testing.T) {
	dir := t.TempDir()
	mustWrite(t, filepath.Join(dir, "a.conf"), "a")
	mustWrite(t, filepath.Join(dir, "sub", "b.conf"), "b")
	mustWrite(t, filepath.Join(dir, "..hidden"), "h")
	mustWrite(t, filepath.Join(dir, "sub", "..hidden"), "h")
	mustWrite(t, filepath.Join(dir, "a.b"), "ab")
	target := filepath.Join(t.TempDir(), "t")
	mustWrite(t, filepath.Join(target, "c"), "c")
	for name, to := range map[string]string{"link": target, "dangling": filepath.Join(dir, "nothing"), "loop": dir} {
		if err := os.Symlink(to, filepath.Join(dir, "sub", name)); err != nil {
			t.Fatal(err)
		}
	}
	v, err := ReadVolume(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := paths(v.Files), []string{"a.b", "a.conf", "sub/b.conf", "sub/link/c"}; !slices.Equal(got, want) {
		t.Errorf("files %v, want %v", got, want)
	}

	t.Run("missing", func(t *testing.T) {
		if _, err := ReadVolume(filepath.Join(dir, "nope")); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("ReadVolume of a missing directory = %v, want ErrNotExist", err)
		}
	})
	t.Run("too big", func(t *testing.T) {
		big := t.TempDir()
		if err := os.WriteFile(filepath.Join(big, "f"), make([]byte, MaxVolumeSize+1), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := ReadVolume(big); err == nil || !strings.Contains(err.Error(), "more than 16 MiB") {
			t.Errorf("ReadVolume of a big directory = %v, want a size error", err)
		}
	})
}

func TestParseRollout(t *testing.T) {
	sum := Hex(Sum(nil))
	cases := []struct {
		name, in, err string
	}{
		{"stable only", `{"source":"configmap/a","stable":{"revision":"1","sha256":"` + sum + `"}}`, ""},
		{"with candidate", `{"source":"configmap/a","stable":{"revision":"1","sha256":"` + sum + `"},"candidate":{"revision":"2","sha256":"` + sum + `"}}`, ""},
		{"unknown field", `{"source":"configmap/a","stable":{"revision":"1","sha256":"` + sum + `"},"phase":"x"}`, ""},
		{"not json", `{`, ReservedKey + ": unexpected end of JSON input"},
		{"no source", `{"stable":{"revision":"1","sha256":"` + sum + `"}}`, ReservedKey + ": no source"},
		{"no stable", `{"source":"configmap/a"}`, ReservedKey + ": stable.revision is empty"},
		{"short sum", `{"source":"configmap/a","stable":{"revision":"1","sha256":"abc"}}`, ReservedKey + `: stable.sha256 "abc": want 64 hex digits`},
		{"upper-case sum", `{"source":"configmap/a","stable":{"revision":"1","sha256":"` + strings.ToUpper(sum) + `"}}`, "want 64 lowercase hex digits"},
		{"bad candidate", `{"source":"configmap/a","stable":{"revision":"1","sha256":"` + sum + `"},"candidate":{"revision":"","sha256":"` + sum + `"}}`, ReservedKey + ": candidate.revision is empty"},
		{"too big", `{"source":"` + strings.Repeat("x", maxRolloutSize) + `"}`, "larger than 65536 bytes"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r, err := ParseRollout([]byte(c.in))
			switch {
			case c.err == "" && err != nil:
				t.Fatalf("ParseRollout: %v", err)
			case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
				t.Fatalf("ParseRollout = %v, want an error with %q", err, c.err)
			case c.err == "" && r.Stable.Sum() != Sum(nil):
				t.Errorf("stable sum %x", r.Stable.Sum())
			}
		})
	}
	r := Rollout{Source: "secret/s", Stable: NewPin("1", Sum(nil)), Candidate: &Pin{Revision: "2", SHA256: sum}}
	back, err := ParseRollout(r.Marshal())
	if err != nil || back.Candidate == nil || *back.Candidate != *r.Candidate || back.Stable != r.Stable {
		t.Errorf("round trip: %+v, %v", back, err)
	}
}

func writeVolume(t *testing.T, payload map[string]kubelet.File) Volume {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "vol")
	if _, err := kubelet.New(dir).Write(payload); err != nil {
		t.Fatal(err)
	}
	v, err := ReadVolume(dir)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func mustWrite(t *testing.T, p, data string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

func paths(files []File) []string {
	var out []string
	for _, f := range files {
		out = append(out, f.Path)
	}
	return out
}
