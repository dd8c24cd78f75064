//go:build !linux

package footprint

func readOnlyRanges() ([]span, error) { return nil, nil }

func unmap([]span) (uint64, error) { return 0, nil }

func resident() (rss, file uint64) { return 0, 0 }
