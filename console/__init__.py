"""The web console: static pages (plain HTML, CSS and JavaScript modules, no build step) and a
small ASGI app that serves them, forwards /runtime/* and /worker/* to the stack's public APIs
on loopback (so the page stays same-origin and the API key stays on the server), and adds the
few endpoints no public API offers: tool dispatch, the agent loop, suites turn by turn."""
