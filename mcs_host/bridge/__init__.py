"""The bridge to the Model Context Protocol, through the official ``mcp`` SDK (the
``mcs-host[mcp]`` extra): :mod:`.server` serves a loaded stack to MCP clients,
:mod:`.client` mounts any MCP server's tools as a ToolDriver, and :mod:`.isolation` runs one
installed driver in a child process of its own."""
