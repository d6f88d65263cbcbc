package shrink

import (
	"strconv"
	"strings"
)

// Test says whether the subset keep (indices into the items being
// shrunk, ascending) still fails the property. An error ends the search:
// DDMin then returns the smallest failing subset found so far.
type Test func(keep []int) (bool, error)

// DDMin is delta debugging (Zeller and Hildebrandt's ddmin) over n items
// that fail together: it returns a subset that still fails and from which
// no single item can be removed without losing the failure (1-minimal),
// testing the empty set first (the failure may need none of them). Each
// subset is tested at most once. An error from test stops the search:
// DDMin returns the smallest failing subset found so far with the error.
func DDMin(n int, test Test) ([]int, error) {
	all := make([]int, n)
	for i := range all {
		all[i] = i
	}
	seen := map[string]bool{}
	try := func(s []int) (bool, error) {
		k := key(s)
		if r, ok := seen[k]; ok {
			return r, nil
		}
		r, err := test(s)
		if err != nil {
			return false, err
		}
		seen[k] = r
		return r, nil
	}
	if n == 0 {
		return all, nil
	}
	if ok, err := try(nil); err != nil || ok {
		if ok {
			return nil, nil
		}
		return all, err
	}
	cur, parts := all, 2
	for len(cur) > 1 {
		next, nextParts, err := reduce(cur, parts, try)
		if err != nil {
			return cur, err
		}
		if next == nil {
			if parts >= len(cur) {
				break // 1-minimal: no single item can go
			}
			parts = min(len(cur), 2*parts)
			continue
		}
		cur, parts = next, nextParts
	}
	return cur, nil
}

// reduce is one round of ddmin over cur split into parts chunks: the first
// chunk that fails alone, else the first complement that fails, with the
// granularity to go on with; nil when none fails.
func reduce(cur []int, parts int, try func([]int) (bool, error)) ([]int, int, error) {
	chunks := split(cur, parts)
	for _, c := range chunks {
		ok, err := try(c)
		if err != nil {
			return nil, 0, err
		}
		if ok {
			return c, 2, nil
		}
	}
	if parts == 2 {
		// With two chunks each complement is the other chunk: tried.
		return nil, 0, nil
	}
	for i := range chunks {
		comp := complement(chunks, i)
		ok, err := try(comp)
		if err != nil {
			return nil, 0, err
		}
		if ok {
			return comp, max(parts-1, 2), nil
		}
	}
	return nil, 0, nil
}

// split cuts s into n chunks of nearly equal length, in order.
func split(s []int, n int) [][]int {
	out := make([][]int, 0, n)
	start := 0
	for i := range n {
		end := start + (len(s)-start)/(n-i)
		out = append(out, s[start:end])
		start = end
	}
	return out
}

// complement is every chunk but chunks[skip], in order.
func complement(chunks [][]int, skip int) []int {
	var out []int
	for i, c := range chunks {
		if i != skip {
			out = append(out, c...)
		}
	}
	return out
}

// key names a subset for the cache of tested subsets.
func key(s []int) string {
	parts := make([]string, len(s))
	for i, v := range s {
		parts[i] = strconv.Itoa(v)
	}
	return strings.Join(parts, ",")
}
