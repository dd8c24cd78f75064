//go:build race

package cost

// raceEnabled: the race detector maps its own shadow memory, which
// anonymous() cannot tell from the heap.
const raceEnabled = true
