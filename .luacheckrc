-- luacheck for the Neovim plugin and its test drivers (STYLE.md chores; `make lint`).
std = 'luajit'
globals = { 'vim' }
max_line_length = 120
-- the generated method table (python -m agentd.protocol.schema --write)
exclude_files = { 'editor-clients/nvim/lua/agentd/protocol.lua' }
