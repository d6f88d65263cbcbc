package clusters

// Wrapped is a cluster that stands for another one: the campaign's pool
// hands each run its pooled cluster wrapped, to keep it when the run
// stops. Unwrap returns the cluster it wraps.
type Wrapped interface {
	Unwrap() Cluster
}

// As returns cl as a T (one of the optional interfaces above: Leader,
// Primaried, Failoverer...), or else the first cluster it wraps, through
// every Wrapped, that is one. A wrapper's own methods come first (the
// pool's Net, Stop and ServerGroups); what it does not have is asked of
// the cluster inside it. Every fault asks through As, never with a bare
// type assertion, so that a run on a pooled cluster sees the same
// topology as a run on its own.
func As[T any](cl Cluster) (T, bool) {
	for cl != nil {
		if t, ok := cl.(T); ok {
			return t, true
		}
		w, ok := cl.(Wrapped)
		if !ok {
			break
		}
		cl = w.Unwrap()
	}
	var zero T
	return zero, false
}
