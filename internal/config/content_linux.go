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
	// Type is int32 on 32-bit ARM, where RAMFS_MAGIC would overflow it.
	t := uint32(st.Type)
	return t == unix.TMPFS_MAGIC || t == unix.RAMFS_MAGIC
}
