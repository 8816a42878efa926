package admission

// SetMax changes the number of execs that may run at once, live (an admin
// setting). A larger max admits waiters at once; a smaller one takes effect
// as running execs finish: nothing running is ever stopped for it.
func (g *Gate) SetMax(max int) {
	if max < 1 {
		max = 1
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.max = max
	g.dispatch()
}

// Max returns the current number of execs that may run at once.
func (g *Gate) Max() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.max
}
