//go:build ignore

// steadiness times a dependent chain of float64 multiplies (no memory
// traffic, nothing shared) in windows of ms milliseconds on the core it
// runs on, for secs seconds, and prints each window's rate in millions a
// second, then their least, median and most. Its rate depends only on the
// core's clock and on how much of the core the process gets: where it
// varies, so does every program on that core, memunet's steps included.
// steadiness.sh runs it on each core in turn.
//
//	go run tools/bench/steadiness.go [secs] [ms]
package main

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"time"
)

func main() {
	secs, ms := 1.0, 2.0
	if len(os.Args) > 1 {
		secs, _ = strconv.ParseFloat(os.Args[1], 64)
	}
	if len(os.Args) > 2 {
		ms, _ = strconv.ParseFloat(os.Args[2], 64)
	}
	// Multiplies a window, from a first calibration.
	n, x, y := 1_000_000, 1.0, 1.0000001
	t0 := time.Now()
	for range n {
		x *= y
	}
	n = max(1000, int(float64(n)*ms/1000/time.Since(t0).Seconds()))
	var rates []float64
	end := time.Now().Add(time.Duration(secs * float64(time.Second)))
	for time.Now().Before(end) {
		t := time.Now()
		for range n {
			x *= y
		}
		rates = append(rates, float64(n)/time.Since(t).Seconds()/1e6)
	}
	if x < 0 {
		fmt.Println(x) // keeps the chain
	}
	s := slices.Sorted(slices.Values(rates))
	fmt.Printf("%d windows of %.0f ms: least %.0f, median %.0f, most %.0f M/s (most/least %.2f)\n",
		len(s), ms, s[0], s[len(s)/2], s[len(s)-1], s[len(s)-1]/s[0])
}
