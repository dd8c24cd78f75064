package main

import (
	"os/exec"
)

func goList(pkg string) (string, error) {
	out, err := exec.Command("go", "list", "-deps", pkg).Output()
	return string(out), err
}
