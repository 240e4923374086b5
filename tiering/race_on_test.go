//go:build race

package tiering

const raceEnabled = true
