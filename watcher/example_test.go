package watcher_test

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/hotreload/hotreload/test/support/kubelet"
	"github.com/hotreload/hotreload/watcher"
)

func ExampleHashDir() {
	root, err := os.MkdirTemp("", "hashdir-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(root)

	hash := func(dir string) [32]byte {
		sum, err := watcher.HashDir(dir)
		if err != nil {
			panic(err)
		}
		return sum
	}
	write := func(v *kubelet.Volume, color string) {
		if _, err := v.Write(map[string]kubelet.File{
			"app.properties": {Data: []byte("color=" + color + "\n")},
		}); err != nil {
			panic(err)
		}
	}

	// A plain directory and a kubelet volume with the same file.
	plain := filepath.Join(root, "plain")
	if err := os.Mkdir(plain, 0o755); err != nil {
		panic(err)
	}
	if err := os.WriteFile(filepath.Join(plain, "app.properties"), []byte("color=blue\n"), 0o644); err != nil {
		panic(err)
	}
	vol := kubelet.New(filepath.Join(root, "volume"))
	write(vol, "blue")
	blue := hash(vol.Dir)
	fmt.Printf("blue: %x\n", blue)
	fmt.Println("plain directory hashes alike:", hash(plain) == blue)

	if err := os.Chmod(filepath.Join(plain, "app.properties"), 0o600); err != nil {
		panic(err)
	}
	fmt.Println("after chmod:", hash(plain) == blue)

	if err := vol.Chmod(); err != nil { // fsGroup churn
		panic(err)
	}
	write(vol, "blue") // an identical update
	fmt.Println("after an identical update:", hash(vol.Dir) == blue)

	write(vol, "green")
	fmt.Println("after an update to green:", hash(vol.Dir) == blue)
	// Output:
	// blue: fa1154b28a2fff001ae31c8d28b280d6dd06a581218caf26101162f549e8b2ea
	// plain directory hashes alike: true
	// after chmod: true
	// after an identical update: true
	// after an update to green: false
}
