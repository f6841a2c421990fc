"""`sift mcp`: sift's search, page reading and skill search as tools of an MCP server on stdio.

protocol  JSON-RPC 2.0 framing, dispatch, both protocol eras, concurrent cancellable calls
tools     the three tools: schemas, argument checks, and thin faces over the libraries
"""
