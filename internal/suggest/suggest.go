// Package suggest finds the word a user most likely meant: the "did you
// mean" of a mistyped flag, config key or folder, by edit distance.
package suggest

import "strings"

// Distance is the optimal string alignment distance between a and b: the
// fewest insertions, deletions, substitutions of one character, and swaps
// of two adjacent ones, that turn a into b ("shapse" -> "shapes" is 1).
// It counts runes, not bytes.
func Distance(a, b string) int {
	s, t := []rune(a), []rune(b)
	// Three rows of the table: two back (for a swap), one back, this one.
	prev2 := make([]int, len(t)+1)
	prev := make([]int, len(t)+1)
	cur := make([]int, len(t)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(s); i++ {
		cur[0] = i
		for j := 1; j <= len(t); j++ {
			cost := 1
			if s[i-1] == t[j-1] {
				cost = 0
			}
			d := min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && s[i-1] == t[j-2] && s[i-2] == t[j-1] {
				d = min(d, prev2[j-2]+1)
			}
			cur[j] = d
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(t)]
}

// Limit is the largest distance at which a candidate still counts as what
// word meant: about one edit in three characters, at least 1, at most 3.
func Limit(word string) int {
	return min(max(len([]rune(word))/3, 1), 3)
}

// Nearest is the candidate nearest word, compared without case and with
// '-' read as '_', if it is within Limit(word) and nearer than any other
// candidate ("" if none is, or if two are equally near). A candidate equal
// to word (so compared) is its own answer.
func Nearest(word string, candidates []string) string {
	w := Fold(word)
	best, bestD, tie := "", Limit(word)+1, false
	for _, c := range candidates {
		d := Distance(w, Fold(c))
		switch {
		case d < bestD:
			best, bestD, tie = c, d, false
		case d == bestD && c != best:
			tie = true
		}
	}
	if tie {
		return ""
	}
	return best
}

// Fold is s as Nearest compares it: lower case, '-' read as '_'.
func Fold(s string) string {
	return strings.ReplaceAll(strings.ToLower(s), "-", "_")
}
