package appdir_test

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/hotreload/hotreload/appdir"
	"github.com/hotreload/hotreload/internal/revision"
)

func ExampleDir() {
	root, err := os.MkdirTemp("", "appdir-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(root)

	d, err := appdir.Open(filepath.Join(root, "app"))
	if err != nil {
		panic(err)
	}
	show := func(what string) {
		b, err := os.ReadFile(filepath.Join(d.Path(), "app.yaml"))
		if err != nil {
			panic(err)
		}
		cur, _ := d.Current()
		good, kept := d.LastGood()
		fmt.Printf("%-22s app.yaml: %s  current %s, last good %q (kept: %v)\n", what, b, cur.Label, good.Label, kept)
	}
	write := func(color, label string) {
		if err := d.Write([]revision.File{{Path: "app.yaml", Data: []byte("color: " + color)}}, label); err != nil {
			panic(err)
		}
	}

	write("blue", "r1")
	show("first write:")
	write("green", "r2")
	show("second write:")
	if err := d.Commit(); err != nil { // the app took r2
		panic(err)
	}
	show("the app took it:")
	write("red", "r3")
	if _, err := d.Restore(); err != nil { // the app refused r3
		panic(err)
	}
	show("the app refused r3:")
	// Output:
	// first write:           app.yaml: color: blue  current r1, last good "" (kept: false)
	// second write:          app.yaml: color: green  current r2, last good "r1" (kept: true)
	// the app took it:       app.yaml: color: green  current r2, last good "" (kept: false)
	// the app refused r3:    app.yaml: color: green  current r2, last good "" (kept: false)
}
