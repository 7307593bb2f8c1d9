"""One module per pane; a view only talks to the QtDocument."""
