//go:build !linux

package config

// MayHoldSecret reports whether the volume at dir may hold Secret data:
// only the kubelet writes Secrets, and only on Linux.
func MayHoldSecret(dir string) bool { return false }
