"""The bridge to the Model Context Protocol, through the official ``mcp`` SDK (the
``mcs-host[mcp]`` extra): :mod:`.server` serves a loaded stack to MCP clients, and
:mod:`.client` mounts any MCP server's tools as a ToolDriver."""
