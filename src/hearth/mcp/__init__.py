"""The MCP server's tools and resources (SPEC 17)."""
