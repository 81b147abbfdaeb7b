"""The browser surface: the Datasette plugin and its pages, `simq serve`, and the charts."""
