//go:build race

package directio

// raceEnabled scales the Pebble tests down: the race detector slows Pebble
// about tenfold.
const raceEnabled = true
