package limit

import "container/list"

// lru is a table of at most size entries that evicts the least recently
// used one when full, in O(1): a map to find an entry, a list to order
// them. A full table reuses the evicted element, so it stops allocating.
// It is not safe for concurrent use; its owner locks.
type lru[K comparable, V any] struct {
	size  int
	order list.List // front: most recently used; values are *slot[K, V]
	index map[K]*list.Element
}

type slot[K comparable, V any] struct {
	key K
	val V
}

func newLRU[K comparable, V any](size int) *lru[K, V] {
	// The map grows on demand: a daemon that is never flooded keeps a
	// small one.
	return &lru[K, V]{size: size, index: make(map[K]*list.Element)}
}

func (c *lru[K, V]) len() int { return len(c.index) }

// get returns k's value, marking it most recently used.
func (c *lru[K, V]) get(k K) (*V, bool) {
	e, ok := c.index[k]
	if !ok {
		return nil, false
	}
	c.order.MoveToFront(e)
	return &e.Value.(*slot[K, V]).val, true
}

// add inserts k, which must not be in the table, as the most recently
// used entry with value v. When the table is full it first evicts the
// least recently used entry and returns that entry's value.
func (c *lru[K, V]) add(k K, v V) (p *V, old V, evicted bool) {
	var s *slot[K, V]
	if c.size > 0 && len(c.index) >= c.size {
		e := c.order.Back()
		s = e.Value.(*slot[K, V])
		delete(c.index, s.key)
		old, evicted = s.val, true
		c.order.MoveToFront(e)
		c.index[k] = e
	} else {
		s = new(slot[K, V])
		c.index[k] = c.order.PushFront(s)
	}
	s.key, s.val = k, v
	return &s.val, old, evicted
}

// each calls fn on every entry, most recently used first.
func (c *lru[K, V]) each(fn func(k K, v *V)) {
	for e := c.order.Front(); e != nil; e = e.Next() {
		s := e.Value.(*slot[K, V])
		fn(s.key, &s.val)
	}
}
