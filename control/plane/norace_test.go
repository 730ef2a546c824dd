//go:build !race

package plane_test

const raceEnabled = false
