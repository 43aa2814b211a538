"""The LSP adapter (PROTOCOL.md §3.2, §4-§12): pygls over LSP framing, one LanguageServer per connection."""
