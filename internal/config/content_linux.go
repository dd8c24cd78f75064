//go:build linux

package config

import "golang.org/x/sys/unix"

// MayHoldSecret reports whether the volume at dir may hold Secret data: the
// kubelet writes Secret, projected and downwardAPI volumes on tmpfs, and
// ConfigMap volumes on disk. A volume that cannot be looked at may.
func MayHoldSecret(dir string) bool {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return true
	}
	return st.Type == unix.TMPFS_MAGIC || st.Type == unix.RAMFS_MAGIC
}
