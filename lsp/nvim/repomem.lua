-- repomem language server for Neovim 0.10+ (built-in vim.lsp, no plugins).
-- Put this file in ~/.config/nvim/plugin/ (or require it from init.lua).
--
-- Neovim 0.10 / 0.11 show repomem's answer through textDocument/completion (one item carrying
-- the whole completion: <C-x><C-o>, or automatically with vim.lsp.completion.enable on 0.11).
-- Neovim 0.12+ also shows it as ghost text through textDocument/inlineCompletion.

local settings = {
  -- Every key is optional; an invalid value is reported and the default kept.
  strategy = "fragrel",   -- infile | vanilla | fragrel | repocoder | repocoder+fragrel | hat
  alpha = 0.5,            -- FragRel eq. 10 weight of the environment score
  topK = 10,              -- fragments retrieved
  maxNewTokens = 64,
  maxPromptTokens = 2048,
  debounceMs = 75,
  -- endpoint = "http://127.0.0.1:8000",  -- an OpenAI-compatible server (vLLM) instead of the embedded model
  -- model = "~/models/other.gguf",
}

vim.api.nvim_create_autocmd("FileType", {
  pattern = { "python", "javascript", "typescript", "go", "rust", "java", "c", "cpp", "ruby" },
  callback = function(args)
    local client_id = vim.lsp.start({
      name = "repomem",
      cmd = { "repomem", "serve" },
      root_dir = vim.fs.root(args.buf, { ".git", ".repomem", "repomem.toml" }),
      init_options = { repomem = settings },
      settings = { repomem = settings },
    })
    if client_id and vim.lsp.inline_completion then -- Neovim 0.12+
      vim.lsp.inline_completion.enable(true, { bufnr = args.buf })
    elseif client_id and vim.lsp.completion and vim.lsp.completion.enable then -- Neovim 0.11
      vim.lsp.completion.enable(true, client_id, args.buf, { autotrigger = false })
    end
  end,
})

local function repomem_client(bufnr)
  return vim.lsp.get_clients({ bufnr = bufnr, name = "repomem" })[1]
end

-- :RepomemExplain: the fragments behind the completion at the cursor, with their scores.
vim.api.nvim_create_user_command("RepomemExplain", function()
  local bufnr = vim.api.nvim_get_current_buf()
  local client = repomem_client(bufnr)
  if not client then
    return vim.notify("repomem is not attached to this buffer", vim.log.levels.WARN)
  end
  local params = vim.lsp.util.make_position_params(0, client.offset_encoding)
  client:request("workspace/executeCommand", { command = "repomem.explain", arguments = { params } },
    function(err, result)
      if err then
        return vim.notify("repomem.explain: " .. err.message, vim.log.levels.ERROR)
      end
      local lines = {}
      for _, f in ipairs(result.fragments or {}) do
        local lift = f.lifted_by and string.format("  <- %s:%d-%d (w=%.3f)", f.lifted_by.path,
          f.lifted_by.start_line, f.lifted_by.end_line, f.lifted_by.weight) or ""
        table.insert(lines, string.format("%2d %s:%d-%d  s_ind=%.2f s_env=%.2f s_rel=%.2f%s", f.rank, f.path,
          f.start_line, f.end_line, f.s_ind, f.s_env, f.s_rel, lift))
      end
      vim.lsp.util.open_floating_preview(lines, "text", { border = "rounded" })
    end, bufnr)
end, {})

-- Accepting a completion item reports it (repomem/didAccept, logged locally with its fragments).
vim.api.nvim_create_autocmd("CompleteDone", {
  callback = function(args)
    local item = vim.v.completed_item
    local lsp_item = item and item.user_data and item.user_data.nvim and item.user_data.nvim.lsp
      and item.user_data.nvim.lsp.completion_item
    local client = repomem_client(args.buf)
    if client and lsp_item and lsp_item.detail == "repomem" and lsp_item.data then
      client:notify("repomem/didAccept", { id = lsp_item.data.id })
    end
  end,
})
