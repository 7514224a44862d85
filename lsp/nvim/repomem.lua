-- repomem language server for Neovim 0.7 and newer (built-in vim.lsp, no other plugins).
-- Put this file in ~/.config/nvim/plugin/ (or :luafile it from init.lua).
--
-- What it does, on every version from 0.7 (Debian bookworm) to 0.12:
-- - starts `repomem serve` for code buffers inside a repository (a folder holding .git, .repomem
--   or repomem.toml), one server per repository;
-- - sets the buffer's 'omnifunc' to repomem's own, so <C-x><C-o> asks repomem. The request is
--   asynchronous: the answer is shown only if nothing was typed and the cursor did not move while
--   it was computed (a late answer is dropped, never pasted over what you typed). Meanwhile
--   "repomem: completing…" shows at the end of the line. Multi-line completions are inserted
--   whole when the item is accepted (<C-y>, or typing on when 'completeopt' inserts it at once);
-- - reports accepted items (repomem/didAccept) and dismissed ones (repomem/didReject);
-- - :RepomemExplain shows the fragments behind the completion at the cursor, with their scores;
-- - on 0.12+ also enables ghost text (vim.lsp.inline_completion, grey where the colour scheme
--   leaves it uncoloured for the terminal) unless
--   vim.g.repomem_inline_completion = false; accept it with a mapping of your own, e.g.
--   vim.keymap.set("i", "<C-l>", function() vim.lsp.inline_completion.get() end).
--
-- Configuration (set before this file loads, e.g. in init.lua):
--   vim.g.repomem_settings = { maxNewTokens = 32 }   -- merged over `defaults` below
--   vim.g.repomem_cmd = { "repomem", "serve" }       -- how to start the server
--   vim.g.repomem_filetypes = { "python", ... }      -- where to start it
--   vim.g.repomem_cursor_idle_ms = 300               -- rest before repomem/didMoveCursor; 0: never
--   vim.g.repomem_inline_completion = false          -- no ghost text on 0.12+
-- For statuslines: vim.g.repomem_status is "completing", "shown", "empty", "working", "dropped"
-- or "error" after each request, vim.g.repomem_answers counts answers, and the User event
-- RepomemStatus fires when they change.

if vim.fn.has("nvim-0.7") ~= 1 then
  -- Everything below needs nvim_create_autocmd / nvim_create_user_command (0.7).
  local v = vim.version and vim.version() or vim.fn.api_info().version
  print(string.format("repomem: Neovim 0.7 or newer is needed (this is %d.%d.%d)", v.major, v.minor, v.patch))
  return
end
if vim.g.loaded_repomem then
  return
end
vim.g.loaded_repomem = true

local NAME = "repomem"

-- Only what the user sets in vim.g.repomem_settings is sent: the server's own defaults apply to the
-- rest (and a repository's repomem.toml), and a few depend on the model (a 1,024-token prompt with
-- the embedded model, 2,048 with a server). Every key is optional; the server reports an unknown key
-- or an invalid value and keeps the value in force.
-- The keys, with the server's defaults (nil: the model that runs decides; lsp/README.md says more):
--   alpha = 0.5, -- eq. 10 weight of the environment score (0 = plain BM25)
--   topK = 10, -- fragments retrieved (K)
--   retrievalBudgetMs = 50, -- milliseconds of retrieval before the environment pass is skipped (0 = none)
--   strategy = "fragrel", -- one of infile | vanilla | dense | fragrel | fragrel-paper | repocoder | repocoder+fragrel | hat | memwalker | readagent | qrmem
--   maxPromptTokens = nil, -- whole prompt, in the backend's tokens (at most the model's window less max_new_tokens); unset: 1,024 with the embedded model, 2,048 with a served one
--   contextShare = 0.5, -- share of the prompt for retrieved blocks (RepoCoder: half)
--   maxSuffixTokens = 64, -- tokens of the code after the cursor kept for fill-in-the-middle
--   maxNewTokens = 64, -- tokens generated at most
--   order = "stable", -- one of score | similarity | stable
--   wordHealing = true, -- after a partly typed name the model writes it again, held to the typed letters (embedded model)
--   continueLines = true, -- the line below a one-line answer taken with Enter continues that answer's prompt
--   maxLines = 16, -- lines of a block completion at most
--   deadlineSeconds = nil, -- seconds a generation (and the embedded model's start) may take; unset: 60; 180 with the 1.5B embedded model
--   gpuLayers = -1, -- layers of the embedded model offloaded to a GPU (-1 = all, 0 = none)
--   flashAttention = nil, -- the embedded model uses llama.cpp's fused attention (faster prompts; answers may differ on near ties); unset: on with the embedded model, off elsewhere
--   reuseChunkTokens = nil, -- the embedded model reuses cached runs at least this long that the next prompt repeats, moved (0 = a common beginning only); unset: 64 with the embedded model, 0 elsewhere
--   embeddedLayers = "auto", -- one of auto | bf16 | int8 | quantized
--   embeddedModel = "qwen2.5-coder-0.5b", -- one of qwen2.5-coder-0.5b | qwen2.5-coder-1.5b
--   model = "", -- a GGUF file (or an embedded model's name) instead of the embedded model
--   hfModel = "", -- a Hugging Face checkpoint folder or GGUF file, run by transformers
--   endpoint = "", -- an OpenAI-compatible server (vLLM) instead of the embedded model
--   endpointLogprobs = true, -- ask the endpoint for log-probabilities (false for a server slow at it, such as llama-cpp-python's)
--   fileOnlyRound = nil, -- also complete from the file alone and show the surer answer (a second generation); unset: off with the embedded model, on with a served one
--   debounceMs = 75, -- milliseconds a completion request that follows another within them waits before it starts
--   answerWithinMs = 8000, -- milliseconds after which a waiting request gets an empty incomplete list while the model runs on
--   warmAfterMs = 400, -- milliseconds the cursor rests, nothing asked, before the completion there starts speculatively (0 = off)
--   warmNewFunction = true, -- an edit in a function not completed in yet starts its completion at once
--   typeThrough = true, -- typing on at a completion's cursor keeps its generation running
--   lineAhead = false, -- while a one-line answer is shown, the line below it is completed as if it were taken and Enter pressed
--   speculateBelow = true, -- after a completion accepted at a line's end, the next line's completion starts where Enter puts the cursor
--   completionCacheEntries = 256, -- finished completions kept (LRU)
--   indexNice = 10, -- nice steps below the model the index builds at (0 = same priority; Linux)
--   feedbackLog = "", -- JSONL of accepts / rejects ("" = feedback.jsonl in the index folder)
local defaults = {}

local filetypes = vim.g.repomem_filetypes
  or { "python", "javascript", "typescript", "javascriptreact", "typescriptreact", "go", "rust", "java", "kotlin",
       "scala", "c", "cpp", "cs", "ruby", "php", "swift", "lua", "sh", "bash" }
-- A repository's root holds one of these; only where none is above a file, a folder holding an
-- index (.repomem) is its root, never the home folder or / (as `repomem` itself decides).
local root_markers = { ".git", "repomem.toml" }
local index_marker = ".repomem"

-- The server answers an empty incomplete list marked `itemDefaults.data.pending` when its answer is
-- not ready within its answer budget (answerWithinMs, 8 s by default); it keeps generating, and
-- asking again at the same place gets the result: "still working", not "nothing".
local function still_working(result)
  local defaults = type(result) == "table" and result.itemDefaults
  return type(defaults) == "table" and type(defaults.data) == "table" and defaults.data.pending == true
end

-- Where the cursor rests this long (milliseconds), the server is told (repomem/didMoveCursor) and
-- starts the completion there, so that <C-x><C-o> finds it ready or under way. 0: never.
local function cursor_idle_ms()
  return tonumber(vim.g.repomem_cursor_idle_ms) or 300
end

local uv = vim.uv or vim.loop
local levels = vim.log.levels

local function settings()
  local user = vim.g.repomem_settings
  local chosen = type(user) == "table" and vim.tbl_extend("force", defaults, user) or vim.deepcopy(defaults)
  -- An empty Lua table is encoded as a JSON array ([]): send an object, which the server expects.
  return next(chosen) == nil and vim.empty_dict() or chosen
end

local function server_cmd()
  local cmd = vim.g.repomem_cmd
  if type(cmd) == "table" and #cmd > 0 then
    return cmd
  end
  return { "repomem", "serve" }
end

-- Client methods: plain functions taking no self up to 0.10, methods from 0.11 (where the dot
-- form still works but is deprecated). The class table of a 0.11+ client holds `request`.
local function uses_methods(client)
  local class = getmetatable(client)
  return type(class) == "table" and type(rawget(class, "request")) == "function"
end

local function request(client, method, params, handler, bufnr)
  if uses_methods(client) then
    return client:request(method, params, handler, bufnr)
  end
  return client.request(method, params, handler, bufnr)
end

local function notify(client, method, params)
  if uses_methods(client) then
    return client:notify(method, params)
  end
  return client.notify(method, params)
end

local function is_stopped(client)
  if uses_methods(client) then
    return client:is_stopped()
  end
  return client.is_stopped()
end

-- The repomem client attached to a buffer, on any version.
local function repomem_client(bufnr)
  bufnr = (bufnr == nil or bufnr == 0) and vim.api.nvim_get_current_buf() or bufnr
  local clients
  if vim.lsp.get_clients then -- 0.10+
    clients = vim.lsp.get_clients({ bufnr = bufnr, name = NAME })
  else -- 0.7 ignores the filter, 0.8/0.9 apply it: filter here either way
    clients = vim.lsp.get_active_clients({ bufnr = bufnr, name = NAME })
  end
  for _, client in ipairs(clients) do
    if client.name == NAME and vim.lsp.buf_is_attached(bufnr, client.id) then
      return client
    end
  end
  return nil
end

-- The nearest folder at or above `dir` for which `holds(folder)` is true, or nil.
local function nearest(dir, holds)
  while dir and dir ~= "" do
    if holds(dir) then
      return dir
    end
    local parent = vim.fn.fnamemodify(dir, ":h")
    if parent == dir then
      return nil
    end
    dir = parent
  end
  return nil
end

-- The repository around the buffer's file (vim.fs.root is 0.10+): the nearest folder with a root
-- marker, else the nearest with an index that is neither the home folder nor the filesystem's root
-- (an index there, once written by a server given the home folder, made it every stray file's root).
local function find_root(bufnr)
  local name = vim.api.nvim_buf_get_name(bufnr)
  if name == "" then
    return nil
  end
  local dir = vim.fn.fnamemodify(name, ":p:h")
  local home = vim.fn.fnamemodify(vim.fn.expand("~"), ":p:h")
  return nearest(dir, function(folder)
    for _, marker in ipairs(root_markers) do
      if uv.fs_stat(folder .. "/" .. marker) then
        return true
      end
    end
    return false
  end) or nearest(dir, function(folder)
    return folder ~= home and vim.fn.fnamemodify(folder, ":h") ~= folder
      and uv.fs_stat(folder .. "/" .. index_marker) ~= nil
  end)
end

-- An LSP character offset (in the client's encoding) -> byte offset in `line`. Written here
-- because vim.str_byteindex changed its signature in 0.11.
local function byte_col(line, character, encoding)
  if encoding == "utf-8" then
    return math.min(character, #line)
  end
  local units, i = 0, 1
  while i <= #line and units < character do
    local b = line:byte(i)
    local len = (b < 0xC0 and 1) or (b < 0xE0 and 2) or (b < 0xF0 and 3) or 4
    units = units + ((encoding == "utf-16" and len == 4) and 2 or 1)
    i = i + len
  end
  return math.min(i - 1, #line)
end

local function set_status(status, answered)
  vim.g.repomem_status = status
  if answered then
    vim.g.repomem_answers = (vim.g.repomem_answers or 0) + 1
  end
  if vim.fn.exists("#User#RepomemStatus") == 1 then
    vim.api.nvim_exec_autocmds("User", { pattern = "RepomemStatus", modeline = false })
  end
end

-- Short notices ("repomem: completing…"). In Insert mode Neovim redraws "-- INSERT --" over any
-- message a callback echoes (so an echo would never be seen while completing): there the notice
-- is virtual text at the end of the cursor line instead, gone once the cursor moves, the text
-- changes, Insert mode ends or a few seconds passed. Elsewhere it is echoed (not kept in :messages).
local notice_ns = vim.api.nvim_create_namespace("repomem_notice")
local notice_at = nil -- {bufnr, row, col, tick, serial} of the notice shown as virtual text
local notice_serial = 0

local function clear_notice()
  if notice_at and vim.api.nvim_buf_is_valid(notice_at.bufnr) then
    vim.api.nvim_buf_clear_namespace(notice_at.bufnr, notice_ns, 0, -1)
  end
  notice_at = nil
end

local function notice(text, linger_ms)
  clear_notice()
  if text == "" then
    return
  end
  if vim.api.nvim_get_mode().mode:sub(1, 1) ~= "i" then
    return vim.api.nvim_echo({ { text } }, false, {})
  end
  local bufnr = vim.api.nvim_get_current_buf()
  local cursor = vim.api.nvim_win_get_cursor(0)
  notice_serial = notice_serial + 1
  notice_at = { bufnr = bufnr, row = cursor[1], col = cursor[2], tick = vim.api.nvim_buf_get_changedtick(bufnr),
                serial = notice_serial }
  vim.api.nvim_buf_set_extmark(bufnr, notice_ns, cursor[1] - 1, 0,
    { virt_text = { { "  " .. text, "Comment" } }, virt_text_pos = "eol" })
  if linger_ms then
    local serial = notice_serial
    vim.defer_fn(function()
      if notice_at and notice_at.serial == serial then
        clear_notice()
      end
    end, linger_ms)
  end
end

-- The notice goes when what it was about is gone (CursorMovedI also fires when nothing moved).
local function notice_outdated()
  if not notice_at then
    return
  end
  local bufnr = vim.api.nvim_get_current_buf()
  local cursor = vim.api.nvim_win_get_cursor(0)
  if bufnr ~= notice_at.bufnr or cursor[1] ~= notice_at.row or cursor[2] ~= notice_at.col
    or vim.api.nvim_buf_get_changedtick(bufnr) ~= notice_at.tick then
    clear_notice()
  end
end

-- -- messages from the server ---------------------------------------------------------------------

local ready_shown = {}

local message_levels = { [1] = levels.ERROR, [2] = levels.WARN, [3] = levels.INFO, [4] = levels.DEBUG }

local handlers = {
  -- The same on every version: the text as the server wrote it (it starts with "repomem:").
  ["window/showMessage"] = function(_, result, ctx)
    if type(result) == "table" and type(result.message) == "string" then
      local text = result.message
      if text:find("repomem: ready", 1, true) then
        if ready_shown[ctx.client_id] then
          return vim.NIL
        end
        ready_shown[ctx.client_id] = true
        -- "repomem: ready (8 files indexed; model llama.cpp:…gguf)" is wider than an 80-column
        -- screen: cut to the echo area, so that it never asks to press Enter.
        local room = tonumber(vim.v.echospace) or 0
        if room > 16 and vim.fn.strdisplaywidth(text) > room then
          text = vim.fn.strcharpart(text, 0, room - 1) .. "…"
        end
      end
      vim.notify(text, message_levels[result.type] or levels.INFO)
    end
    return vim.NIL
  end,
  -- window/logMessage keeps Neovim's own handler (lsp.log). Its "repomem: ready" is the index's
  -- alone, logged before the model is in (or after it failed): it is not the server's readiness,
  -- which comes once, with window/showMessage.
}

-- -- completion ------------------------------------------------------------------------------------

local sequence = 0 -- number of the newest completion request (older answers are dropped)
local offered = nil -- the repomem item shown in the popup menu: {bufnr, id}

local function split_lines(text)
  return vim.split(text, "\n", { plain = true })
end

-- The textEdit's start as a byte column of the cursor line, or nil when it is elsewhere.
local function edit_start(item, row, line, encoding)
  local edit = item.textEdit
  local range = edit and (edit.range or edit.insert)
  if not range or range.start.line ~= row then
    return nil
  end
  return byte_col(line, range.start.character, encoding)
end

local function show_answer(state, err, result, client)
  if state.seq ~= sequence then
    return -- a newer request replaced this one; it reports for itself
  end
  local bufnr = vim.api.nvim_get_current_buf()
  local cursor = vim.api.nvim_win_get_cursor(0)
  local mode = vim.api.nvim_get_mode().mode
  if bufnr ~= state.bufnr or vim.api.nvim_get_current_win() ~= state.win
    or vim.api.nvim_buf_get_changedtick(bufnr) ~= state.tick
    or cursor[1] ~= state.cursor[1] or cursor[2] ~= state.cursor[2] or mode:sub(1, 1) ~= "i" then
    -- Typed on, moved or left insert mode meanwhile: the answer is for text that is gone.
    clear_notice()
    return set_status("dropped", true)
  end
  if err then
    notice("repomem: " .. (err.message or "completion failed"), 5000)
    return set_status("error", true)
  end
  local items = type(result) == "table" and (result.items or result) or {}
  local item = items[1]
  local text = item and ((item.textEdit and item.textEdit.newText) or item.insertText or item.label)
  if type(text) ~= "string" or text == "" then
    if still_working(result) then
      notice("repomem: still working, ask again", 5000)
      return set_status("working", true)
    end
    notice("repomem: no completion", 3000)
    return set_status("empty", true)
  end
  local row = cursor[1] - 1
  local line = vim.api.nvim_get_current_line()
  local start = edit_start(item, row, line, client.offset_encoding or "utf-16") or cursor[2]
  if start > cursor[2] then
    start = cursor[2]
  end
  local lines = split_lines(text)
  local id = type(item.data) == "table" and item.data.id or nil
  if type(id) ~= "string" and type(id) ~= "number" then
    id = nil -- JSON null or a foreign shape: no feedback for this item
  end
  -- complete() cannot insert a newline: the menu gets the first line, CompleteDone the rest.
  local entry = {
    word = lines[1],
    abbr = (item.label and item.label ~= "") and split_lines(item.label)[1] or lines[1],
    menu = "[repomem]",
    info = #lines > 1 and text or "",
    empty = 1,
    dup = 1,
    icase = 1,
    user_data = { repomem = { id = id, text = text, row = row, col = start, client_id = client.id } },
  }
  clear_notice()
  offered = { bufnr = bufnr, id = id, client_id = client.id }
  set_status("shown", true)
  vim.fn.complete(start + 1, { entry })
end

-- 'omnifunc' of the buffers repomem serves: asks the server and returns at once; the answer is
-- shown later by show_answer (complete()), as Neovim's own LSP omnifunc does.
local function omnifunc(findstart, _)
  if findstart ~= 1 then
    return {}
  end
  local bufnr = vim.api.nvim_get_current_buf()
  local client = repomem_client(bufnr)
  if not client then
    notice("repomem: no server for this buffer (yet)", 3000)
    return -3
  end
  sequence = sequence + 1
  local state = {
    seq = sequence,
    bufnr = bufnr,
    win = vim.api.nvim_get_current_win(),
    tick = vim.api.nvim_buf_get_changedtick(bufnr),
    cursor = vim.api.nvim_win_get_cursor(0),
  }
  local params = vim.lsp.util.make_position_params(0, client.offset_encoding)
  params.context = { triggerKind = 1 } -- Invoked
  notice("repomem: completing…")
  set_status("completing", false)
  local ok = request(client, "textDocument/completion", params, function(err, result)
    show_answer(state, err, result, client)
  end, bufnr)
  if not ok then
    notice("repomem: the server is not running", 3000)
    set_status("error", true)
  end
  -- -3: leave completion mode quietly; complete() opens the menu when the answer comes.
  return -3
end

-- Exposed for 'omnifunc' (v:lua needs a global name).
_G.repomem_omnifunc = omnifunc

-- After a repomem item was accepted, replace its first line (what complete() inserted) with the
-- whole completion and put the cursor at its end.
local function insert_rest(bufnr, data, word)
  local text = data.text
  if not text or not text:find("\n", 1, true) then
    return
  end
  local line = vim.api.nvim_buf_get_lines(bufnr, data.row, data.row + 1, false)[1] or ""
  if line:sub(data.col + 1, data.col + #word) ~= word then
    return -- the inserted first line is not where it was: leave the buffer alone
  end
  local lines = split_lines(text)
  vim.api.nvim_buf_set_text(bufnr, data.row, data.col, data.row, data.col + #word, lines)
  local last = lines[#lines]
  local end_row = data.row + #lines - 1
  vim.api.nvim_win_set_cursor(0, { end_row + 1, #lines == 1 and data.col + #last or #last })
end

-- Whether the completed item is in the buffer. v:completed_item alone does not tell: depending on
-- the version and 'completeopt' it can still name the item after <C-e> restored the typed text,
-- and v:event.reason (0.10+) says "discard" for an item that was inserted and kept (typing on).
local function was_inserted(bufnr, data, word)
  if word == "" then -- nothing visible was inserted (the completion starts with a line break)
    local reason = type(vim.v.event) == "table" and vim.v.event.reason or nil
    return reason == nil or reason == "accept"
  end
  local line = vim.api.nvim_buf_get_lines(bufnr, data.row, data.row + 1, false)[1] or ""
  return line:sub(data.col + 1, data.col + #word) == word
end

local function on_complete_done(args)
  local shown = offered
  offered = nil
  if not shown or shown.bufnr ~= args.buf then
    return
  end
  local client = vim.lsp.get_client_by_id(shown.client_id)
  if not client or is_stopped(client) then
    return
  end
  local item = vim.v.completed_item
  local data = type(item) == "table" and type(item.user_data) == "table" and item.user_data.repomem
  if type(data) == "table" and was_inserted(args.buf, data, item.word or "") then
    if data.id then
      notify(client, "repomem/didAccept", { id = data.id })
    end
    -- Changing text inside CompleteDone is refused by some versions (textlock): then just after.
    local ok = pcall(insert_rest, args.buf, data, item.word or "")
    if not ok then
      vim.schedule(function()
        pcall(insert_rest, args.buf, data, item.word or "")
      end)
    end
  elseif shown.id then
    -- The menu closed without the item in the text (<C-e>, or typing past it): a rejection.
    notify(client, "repomem/didReject", { id = shown.id })
  end
end

-- -- starting the server -------------------------------------------------------------------------

local start_failed = false
local clients_by_root = {} -- 0.7 only: root -> client id (vim.lsp.start reuses clients itself)

local function client_config(root)
  local options = settings()
  return {
    name = NAME,
    cmd = server_cmd(),
    root_dir = root,
    workspace_folders = { { uri = vim.uri_from_fname(root), name = vim.fn.fnamemodify(root, ":t") } },
    init_options = { repomem = options },
    settings = { repomem = options },
    handlers = handlers,
    on_exit = function(_, _, client_id)
      for key, id in pairs(clients_by_root) do
        if id == client_id then
          clients_by_root[key] = nil
        end
      end
    end,
  }
end

local function start_client(bufnr, root)
  local config = client_config(root)
  if vim.lsp.start then -- 0.8+: finds or starts the client for this name and root, and attaches
    return vim.lsp.start(config, { bufnr = bufnr })
  end
  -- 0.7. Not vim.lsp.get_client_by_id: it knows a client only once the server answered
  -- `initialize`, and a second buffer opened before that would start a second server.
  local id = clients_by_root[root] -- forgotten in on_exit
  if not id then
    -- Neovim stops every client it started (start_client included) when it exits.
    id = vim.lsp.start_client(config)
    clients_by_root[root] = id
  end
  if id then
    vim.lsp.buf_attach_client(bufnr, id)
  end
  return id
end

-- -- ghost text that looks unwritten --------------------------------------------------------------

-- Neovim draws ghost text in ComplHint, which links to NonText, and its default colour scheme gives
-- NonText a GUI colour only: without 'termguicolors' (a terminal Neovim finds no 24-bit colour in:
-- tmux without its RGB feature, the Linux console) the suggestion looked exactly like typed text.
-- Where ComplHint ends with no terminal colour it gets a grey, italic where the terminal has it; a
-- colour scheme that colours it or NonText for terminals keeps its own.
local function set_ghost_text_colour()
  if vim.o.termguicolors then
    return
  end
  local ok, resolved = pcall(vim.api.nvim_get_hl, 0, { name = "ComplHint", link = false })
  if not ok or resolved.ctermfg ~= nil then
    return
  end
  resolved.ctermfg = (tonumber(vim.api.nvim_eval("&t_Co")) or 8) >= 256 and 244 or 8
  resolved.cterm = vim.tbl_extend("force", resolved.cterm or {}, { italic = true })
  vim.api.nvim_set_hl(0, "ComplHint", resolved)
end

local ghost_colour_watched = false

local function ghost_text_visible()
  set_ghost_text_colour()
  if not ghost_colour_watched then
    ghost_colour_watched = true -- a colour scheme loaded later resets the groups: look again after it
    vim.api.nvim_create_autocmd("ColorScheme", { callback = set_ghost_text_colour })
    vim.api.nvim_create_autocmd("OptionSet", { pattern = "termguicolors", callback = set_ghost_text_colour })
  end
end

local function attach(args)
  local bufnr = args.buf
  if vim.bo[bufnr].buftype ~= "" then
    return
  end
  local root = find_root(bufnr)
  if not root or start_failed then
    return
  end
  local ok, client_id = pcall(start_client, bufnr, root)
  if not ok or not client_id then
    start_failed = true -- one message, not one per buffer
    local reason = ok and "" or (": " .. tostring(client_id))
    vim.notify("repomem: cannot start " .. table.concat(server_cmd(), " ") .. reason, levels.ERROR)
    return
  end
  -- After the filetype plugin (python's sets its own omnifunc); Neovim's defaults leave a set one.
  vim.bo[bufnr].omnifunc = "v:lua.repomem_omnifunc"
  if vim.lsp.inline_completion and vim.lsp.inline_completion.enable and vim.g.repomem_inline_completion ~= false then
    pcall(vim.lsp.inline_completion.enable, true, { bufnr = bufnr }) -- 0.12+: ghost text too
    ghost_text_visible()
  end
end

-- -- where the cursor rests ----------------------------------------------------------------------

local rest_timer = nil
local last_rest = nil -- "bufnr:changedtick:row:col" last reported

local function report_rest()
  local bufnr = vim.api.nvim_get_current_buf()
  local client = repomem_client(bufnr)
  if not client or is_stopped(client) then
    return
  end
  local cursor = vim.api.nvim_win_get_cursor(0)
  local here = table.concat({ bufnr, vim.api.nvim_buf_get_changedtick(bufnr), cursor[1], cursor[2] }, ":")
  if here == last_rest then
    return
  end
  last_rest = here
  -- Past Neovim's didChange debounce (150 ms), so the position refers to text the server has.
  notify(client, "repomem/didMoveCursor", vim.lsp.util.make_position_params(0, client.offset_encoding))
end

local function cursor_moved()
  local idle = cursor_idle_ms()
  if idle <= 0 or not repomem_client(vim.api.nvim_get_current_buf()) then
    return
  end
  if not rest_timer then
    rest_timer = uv.new_timer()
  end
  rest_timer:stop()
  rest_timer:start(idle, 0, vim.schedule_wrap(report_rest))
end

local group = vim.api.nvim_create_augroup("repomem", { clear = true })
vim.api.nvim_create_autocmd({ "CursorMoved", "CursorMovedI" }, { group = group, callback = cursor_moved })
vim.api.nvim_create_autocmd("FileType", { group = group, pattern = filetypes, callback = attach })
vim.api.nvim_create_autocmd("CompleteDone", { group = group, callback = on_complete_done })
vim.api.nvim_create_autocmd({ "CursorMovedI", "TextChangedI", "TextChangedP" }, { group = group,
  callback = notice_outdated })
vim.api.nvim_create_autocmd({ "InsertLeave", "BufLeave" }, { group = group, callback = clear_notice })

-- :RepomemExplain: the fragments behind the completion at the cursor, with their scores.
vim.api.nvim_create_user_command("RepomemExplain", function()
  local bufnr = vim.api.nvim_get_current_buf()
  local client = repomem_client(bufnr)
  if not client then
    return vim.notify("repomem is not attached to this buffer", levels.WARN)
  end
  -- (window, encoding) from 0.7 on; 0.11 warns when the encoding is missing.
  local params = vim.lsp.util.make_position_params(0, client.offset_encoding)
  request(client, "workspace/executeCommand", { command = "repomem.explain", arguments = { params } },
    function(err, result)
      if err then
        return vim.notify("repomem.explain: " .. (err.message or tostring(err)), levels.ERROR)
      end
      if type(result) ~= "table" then
        return vim.notify("repomem.explain: no answer", levels.WARN)
      end
      local lines = {}
      for _, f in ipairs(result.fragments or {}) do
        local lift = type(f.lifted_by) == "table" and string.format("  <- %s:%d-%d (w=%.3f)", f.lifted_by.path,
          f.lifted_by.start_line, f.lifted_by.end_line, f.lifted_by.weight) or ""
        table.insert(lines, string.format("%2d %s:%d-%d  s_ind=%.2f s_env=%.2f s_rel=%.2f%s", f.rank, f.path,
          f.start_line, f.end_line, f.s_ind, f.s_env, f.s_rel, lift))
      end
      if #lines == 0 then
        lines = { type(result.error) == "string" and result.error or "no fragments" }
      end
      vim.lsp.util.open_floating_preview(lines, "text", { border = "rounded" })
    end, bufnr)
end, {})
