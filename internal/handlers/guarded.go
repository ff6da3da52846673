package handlers

import "github.com/gofiber/fiber/v2"

// guarded is a router whose every route runs authorize first. The API
// group and the dashboard register through one, so a route added there
// cannot skip the check; a route missing from accessTable is refused.
type guarded struct {
	fiber.Router
	check fiber.Handler
}

func (g guarded) with(h []fiber.Handler) []fiber.Handler {
	return append([]fiber.Handler{g.check}, h...)
}

// Get registers a GET (and HEAD) route behind the check.
func (g guarded) Get(path string, h ...fiber.Handler) fiber.Router {
	g.Router.Get(path, g.with(h)...)
	return g
}

// Head registers a HEAD route behind the check.
func (g guarded) Head(path string, h ...fiber.Handler) fiber.Router {
	g.Router.Head(path, g.with(h)...)
	return g
}

// Post registers a POST route behind the check.
func (g guarded) Post(path string, h ...fiber.Handler) fiber.Router {
	g.Router.Post(path, g.with(h)...)
	return g
}

// Put registers a PUT route behind the check.
func (g guarded) Put(path string, h ...fiber.Handler) fiber.Router {
	g.Router.Put(path, g.with(h)...)
	return g
}

// Patch registers a PATCH route behind the check.
func (g guarded) Patch(path string, h ...fiber.Handler) fiber.Router {
	g.Router.Patch(path, g.with(h)...)
	return g
}

// Delete registers a DELETE route behind the check.
func (g guarded) Delete(path string, h ...fiber.Handler) fiber.Router {
	g.Router.Delete(path, g.with(h)...)
	return g
}

// Add registers a route of any method behind the check.
func (g guarded) Add(method, path string, h ...fiber.Handler) fiber.Router {
	g.Router.Add(method, path, g.with(h)...)
	return g
}

// All registers a route for every method behind the check.
func (g guarded) All(path string, h ...fiber.Handler) fiber.Router {
	g.Router.All(path, g.with(h)...)
	return g
}

// Group returns a sub-router that is guarded too.
func (g guarded) Group(prefix string, h ...fiber.Handler) fiber.Router {
	return guarded{Router: g.Router.Group(prefix, h...), check: g.check}
}
