//go:build !race

package directio

const raceEnabled = false
