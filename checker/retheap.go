package checker

// retHeap is a min-heap of operations by return time.
type retHeap struct {
	ops *[]lockOp
	h   []int32
}

func (r *retHeap) len() int { return len(r.h) }

func (r *retHeap) min() int32 { return r.h[0] }

func (r *retHeap) key(i int) int64 { return (*r.ops)[r.h[i]].ret }

func (r *retHeap) push(i int32) {
	r.h = append(r.h, i)
	k := len(r.h) - 1
	for k > 0 {
		p := (k - 1) / 2
		if r.key(p) <= r.key(k) {
			break
		}
		r.h[p], r.h[k] = r.h[k], r.h[p]
		k = p
	}
}

func (r *retHeap) pop() int32 {
	top := r.h[0]
	n := len(r.h) - 1
	r.h[0] = r.h[n]
	r.h = r.h[:n]
	k := 0
	for {
		l := 2*k + 1
		if l >= n {
			break
		}
		m := l
		if l+1 < n && r.key(l+1) < r.key(l) {
			m = l + 1
		}
		if r.key(k) <= r.key(m) {
			break
		}
		r.h[k], r.h[m] = r.h[m], r.h[k]
		k = m
	}
	return top
}
