" repomem language server for Vim 8.2 / 9 (+popupwin) with ALE 3.x (Debian 12: apt-get install vim vim-ale).
" Put this file in ~/.vim/plugin/ (ALE must be on 'runtimepath', as Debian's package puts it).
"
" What it does:
" - registers `repomem serve` as an ALE language server ("linter" named repomem) for code
"   buffers inside a repository (a folder holding .git, .repomem or repomem.toml); ALE starts it,
"   one per repository, and keeps it told of every change;
" - sets the buffer's 'omnifunc' to repomem's own, so <C-x><C-o> asks repomem. ALE's own LSP
"   completion cuts an item's text at its first "(" (it takes the rest for a snippet's arguments),
"   which would drop most of a completion such as `compute_tax(amount_cents, tax_class)`: this
"   omnifunc sends the request through ALE's connection and shows the item whole. The request is
"   asynchronous: the answer is shown (the menu opens by itself) only if nothing was typed and the
"   cursor did not move meanwhile; a late answer is dropped, never pasted over what you typed. An
"   answer the server is still working on ("pending", past its answer budget) is asked again
"   while the cursor stays;
" - multi-line completions: the menu shows the first line; accepting it inserts the rest;
" - reports accepted items (repomem/didAccept) and dismissed ones (repomem/didReject);
" - :RepomemExplain lists the fragments behind the completion at the cursor, with their scores,
"   in a popup that closes when the cursor moves;
" - echoes the server's "repomem: ready" (ALE shows only a server's errors).
"
" Debian's vim-ale is an optional package: `packadd! ale` in your vimrc, before plugins load.
" `filetype plugin on` there too: a vimrc of your own stops Vim loading defaults.vim, which turned
" file types on, and repomem starts for a buffer of a code file type only.
" Configuration (before this file loads, e.g. in your vimrc):
"   let g:repomem_command = 'repomem'               " the executable; `serve` is added
"   let g:repomem_settings = {'maxNewTokens': 32}   " sent as initializationOptions (lsp/README.md)
"   let g:repomem_filetypes = ['python', ...]       " where to register it
" ALE runs every linter it has for a filetype unless told otherwise; to run only repomem there:
"   let g:ale_linters = {'python': ['repomem']}
" For statuslines: g:repomem_status is "ready", "completing", "shown", "empty", "working",
" "dropped" or "error", g:repomem_answers counts answers; the User event RepomemStatus fires
" when they change.

if exists('g:loaded_repomem')
  finish
endif
let g:loaded_repomem = 1

if globpath(&runtimepath, 'autoload/ale/lsp_linter.vim') is# ''
  echomsg 'repomem: ALE is needed (apt-get install vim-ale, or ALE on your runtimepath)'
  finish
endif

let g:repomem_status = get(g:, 'repomem_status', '')
let g:repomem_answers = get(g:, 'repomem_answers', 0)
let s:filetypes = get(g:, 'repomem_filetypes',
      \ ['python', 'javascript', 'javascriptreact', 'typescript', 'typescriptreact', 'go', 'rust', 'java',
      \  'kotlin', 'scala', 'c', 'cpp', 'cs', 'ruby', 'php', 'swift', 'lua', 'sh', 'bash'])
" A repository's root holds one of these; only where none is above a file, a folder holding an
" index (.repomem) is its root, never the home folder or / (as `repomem` itself decides).
let s:markers = ['.git', 'repomem.toml']
let s:pending = {}     " request id -> the place it was asked at
let s:answer = {}      " the answer waiting for the omnifunc: {key, start, items}
let s:offered = {}     " the item in the menu: {buffer, id, line, start, word, rest}
let s:listening = {}   " connection ids our message callback is registered with
let s:retry_timer = -1
let s:explaining = {}  " explain request id -> 1

" -- the server, as an ALE linter -----------------------------------------------------------------

function! s:Root(buffer) abort
  let l:start = fnamemodify(bufname(a:buffer), ':p:h')
  let l:home = fnamemodify(expand('~'), ':p:h')
  for l:pass in ['markers', 'index']
    let l:dir = l:start
    while 1
      let l:parent = fnamemodify(l:dir, ':h')
      if l:pass is# 'markers'
        for l:marker in s:markers
          if isdirectory(l:dir . '/' . l:marker) || filereadable(l:dir . '/' . l:marker)
            return l:dir
          endif
        endfor
      elseif l:dir isnot# l:home && l:parent isnot# l:dir && isdirectory(l:dir . '/.repomem')
        return l:dir
      endif
      if l:parent is# l:dir
        break
      endif
      let l:dir = l:parent
    endwhile
  endfor
  return ''
endfunction

function! s:Settings(buffer) abort
  return {'repomem': get(g:, 'repomem_settings', {})}
endfunction

for s:filetype in s:filetypes
  call ale#linter#Define(s:filetype, {
        \ 'name': 'repomem',
        \ 'lsp': 'stdio',
        \ 'executable': {buffer -> get(g:, 'repomem_command', 'repomem')},
        \ 'command': '%e serve',
        \ 'project_root': function('s:Root'),
        \ 'initialization_options': function('s:Settings'),
        \ })
endfor

function! s:Linter(buffer) abort
  let l:filetype = ale#linter#ResolveFiletype(getbufvar(a:buffer, '&filetype'))
  let l:found = filter(ale#linter#GetAll(l:filetype), {_, linter -> linter.name is# 'repomem'})
  return empty(l:found) ? {} : l:found[0]
endfunction

function! s:SetStatus(status, answered) abort
  let g:repomem_status = a:status
  if a:answered
    let g:repomem_answers += 1
  endif
  if exists('#User#RepomemStatus')
    doautocmd <nomodeline> User RepomemStatus
  endif
endfunction

" -- asking -----------------------------------------------------------------------------------------

" Where the cursor is now; `key` changes with any edit, cursor move or buffer.
function! s:Here() abort
  let l:buffer = bufnr('')
  let l:line = line('.') - 1
  let l:col = col('.') - 1
  return {'buffer': l:buffer, 'line': l:line, 'col': l:col,
        \ 'key': join([l:buffer, getbufvar(l:buffer, 'changedtick'), l:line, l:col], ':')}
endfunction

" `status`: what the statusline says meanwhile ("working" while a pending answer is asked again).
function! s:Ask(here, status = 'completing') abort
  let l:linter = s:Linter(a:here.buffer)
  if empty(l:linter)
    call s:SetStatus('error', 1)
    return
  endif
  if g:repomem_status isnot# a:status
    call s:SetStatus(a:status, 0)
  endif
  call ale#lsp_linter#StartLSP(a:here.buffer, l:linter, function('s:Send', [a:here]))
endfunction

function! s:Listen(conn) abort
  if !has_key(s:listening, a:conn)
    let s:listening[a:conn] = 1
    call ale#lsp#RegisterCallback(a:conn, function('s:OnMessage'))
  endif
endfunction

" Once ALE has started the server for a buffer: listen to it (its "ready" comes later). Asking ALE
" for the connection fires ALELSPStarted again, hence the guard.
let s:in_started = 0
function! s:Started() abort
  let l:linter = s:Linter(bufnr(''))
  if s:in_started || empty(l:linter)
    return
  endif
  let s:in_started = 1
  try
    call ale#lsp_linter#StartLSP(bufnr(''), l:linter, {linter, details -> s:Listen(details.connection_id)})
  finally
    let s:in_started = 0
  endtry
endfunction

" LSP counts UTF-16 units; Vim counts bytes. Vim 9.0.1485 and later count UTF-16 units
" (strutf16len, utf16idx); before, each character is counted, composing ones apart (as UTF-16
" does), and one beyond the BMP (an emoji: two UTF-16 units) once more.
function! s:Utf16Length(text) abort
  if exists('*strutf16len')
    return strutf16len(a:text)
  endif
  let l:points = str2list(a:text)
  return len(l:points) + len(filter(copy(l:points), 'v:val > 0xFFFF'))
endfunction

" The byte index of UTF-16 unit `units` of `text` (its end past the last), or -1.
function! s:Utf16ByteIndex(text, units) abort
  if exists('*utf16idx')
    return byteidxcomp(a:text, a:units, v:true)
  endif
  let l:units = 0
  let l:bytes = 0
  for l:point in str2list(a:text)
    if l:units >= a:units
      break
    endif
    let l:units += l:point > 0xFFFF ? 2 : 1
    let l:bytes += len(nr2char(l:point))
  endfor
  return l:units == a:units && l:bytes <= len(a:text) ? l:bytes : -1
endfunction

function! s:Position(buffer, line, col) abort
  let l:text = get(getbufline(a:buffer, a:line + 1), 0, '')
  return {'textDocument': {'uri': ale#util#ToURI(fnamemodify(bufname(a:buffer), ':p'))},
        \ 'position': {'line': a:line, 'character': s:Utf16Length(strpart(l:text, 0, a:col))}}
endfunction

function! s:Send(here, linter, details) abort
  let l:conn = a:details.connection_id
  call s:Listen(l:conn)
  call ale#lsp#NotifyForChanges(l:conn, a:here.buffer)
  let l:params = s:Position(a:here.buffer, a:here.line, a:here.col)
  let l:id = ale#lsp#Send(l:conn, [0, 'textDocument/completion', l:params])
  if l:id > 0
    let s:pending[l:id] = extend(copy(a:here), {'connection': l:conn})
  endif
endfunction

function! s:OnMessage(conn, message) abort
  let l:method = get(a:message, 'method', '')
  if l:method is# 'window/showMessage' || l:method is# 'window/logMessage'
    let l:text = get(get(a:message, 'params', {}), 'message', '')
    " The server's readiness (index and model in) comes once, with window/showMessage; a
    " window/logMessage "repomem: ready" is the index's alone (the model may be loading or failed).
    if l:method is# 'window/showMessage' && type(l:text) == v:t_string && l:text =~# '^repomem: ready'
      call s:SetStatus('ready', 0)
      echomsg l:text
    endif
    return
  endif
  if has_key(a:message, 'id') && has_key(s:explaining, a:message.id)
    call remove(s:explaining, a:message.id)
    call s:ShowExplanation(a:message)
    return
  endif
  if !has_key(a:message, 'id') || !has_key(s:pending, a:message.id)
    return
  endif
  let l:asked = remove(s:pending, a:message.id)
  if has_key(a:message, 'error')
    call s:SetStatus('error', 1)
    return
  endif
  let l:result = get(a:message, 'result', {})
  let l:result = type(l:result) == v:t_dict ? l:result : {}
  " Typed on, moved or left Insert mode meanwhile: the answer (even "still working") is for text
  " that is gone, and nothing asks again there.
  if mode() isnot# 'i' || s:Here().key isnot# l:asked.key
    call s:SetStatus('dropped', 1)
    return
  endif
  if get(get(get(l:result, 'itemDefaults', {}), 'data', {}), 'pending', v:false) is v:true
    " Past the server's answer budget, it works on: ask again while the cursor stays.
    call s:SetStatus('working', 1)
    call timer_stop(s:retry_timer)
    let s:retry_timer = timer_start(500, {_ -> s:AskAgain(l:asked)})
    return
  endif
  let l:items = get(l:result, 'items', [])
  if empty(l:items)
    call s:SetStatus('empty', 1)
    return
  endif
  call s:Show(l:asked, l:items[0])
endfunction

function! s:AskAgain(asked) abort
  if mode() is# 'i' && s:Here().key is# a:asked.key
    call s:Ask(a:asked, 'working')
  endif
endfunction

" The item whole: its edit replaces from the word's start (after `return com`, from `com`).
function! s:Show(asked, item) abort
  let l:text = getline(a:asked.line + 1)
  let l:edit = get(a:item, 'textEdit', {})
  let l:whole = get(l:edit, 'newText', get(a:item, 'insertText', a:item.label))
  let l:start = a:asked.col
  if has_key(l:edit, 'range')
    " The same units as s:Position: UTF-16's, composing characters counted apart (byteidx()
    " counts a character with its composing ones as one, which moved the start right after any).
    let l:start = s:Utf16ByteIndex(l:text, l:edit.range.start.character)
    let l:start = l:start < 0 ? a:asked.col : l:start
  endif
  let l:lines = split(l:whole, "\n", 1)
  let l:id = get(get(a:item, 'data', {}), 'id', v:null)
  let s:answer = {'key': a:asked.key, 'start': l:start, 'items': [{
        \ 'word': l:lines[0], 'abbr': a:item.label, 'menu': '[repomem]', 'info': l:whole,
        \ 'empty': 1, 'dup': 1,
        \ 'user_data': {'repomem': {'id': l:id, 'rest': l:lines[1:], 'line': a:asked.line,
        \                           'start': l:start, 'connection': a:asked.connection}}}]}
  call s:SetStatus('shown', 1)
  " The menu opens through the omnifunc, which now finds the answer.
  call feedkeys("\<Plug>(RepomemShow)", 'm')
endfunction

function! RepomemOmniFunc(findstart, base) abort
  if a:findstart
    if !empty(s:answer) && s:answer.key is# s:Here().key
      return s:answer.start
    endif
    let s:answer = {}
    call s:Ask(s:Here())
    return -3  " nothing yet: the answer reopens the menu when it comes
  endif
  let l:items = get(s:answer, 'items', [])
  let s:offered = empty(l:items) ? {} : extend({'buffer': bufnr('')}, l:items[0].user_data.repomem)
  let s:answer = {}
  return l:items
endfunction

inoremap <silent> <Plug>(RepomemShow) <C-x><C-o>

" -- :RepomemExplain --------------------------------------------------------------------------------

function! s:Explain() abort
  let l:buffer = bufnr('')
  let l:linter = s:Linter(l:buffer)
  if empty(l:linter)
    echomsg 'repomem: not registered for this filetype'
    return
  endif
  let l:where = s:Position(l:buffer, line('.') - 1, col('.') - 1)
  call ale#lsp_linter#StartLSP(l:buffer, l:linter, function('s:SendExplain', [l:buffer, l:where]))
endfunction

function! s:SendExplain(buffer, where, linter, details) abort
  call s:Listen(a:details.connection_id)
  call ale#lsp#NotifyForChanges(a:details.connection_id, a:buffer)
  let l:id = ale#lsp#Send(a:details.connection_id, [0, 'workspace/executeCommand',
        \ {'command': 'repomem.explain', 'arguments': [a:where]}])
  if l:id > 0
    let s:explaining[l:id] = 1
  endif
endfunction

function! s:ShowExplanation(message) abort
  let l:result = get(a:message, 'result', {})
  let l:lines = []
  for l:f in type(l:result) == v:t_dict ? get(l:result, 'fragments', []) : []
    call add(l:lines, printf('%2d %s:%d-%d  s_ind=%.2f s_env=%.2f s_rel=%.2f', l:f.rank, l:f.path,
          \ l:f.start_line, l:f.end_line, l:f.s_ind, l:f.s_env, l:f.s_rel))
  endfor
  if empty(l:lines)
    let l:lines = [has_key(a:message, 'error') ? 'repomem.explain: ' . get(a:message.error, 'message', '')
          \ : 'no fragments']
  endif
  " A popup at the cursor, closed when the cursor moves (as Neovim's float in lsp/nvim).
  call popup_atcursor(l:lines, {'moved': 'any', 'border': [], 'padding': [0, 1, 0, 1]})
endfunction

command! RepomemExplain call s:Explain()

" -- accepted or dismissed --------------------------------------------------------------------------

function! s:Notify(connection, method, params) abort
  try
    call ale#lsp#Send(a:connection, [1, a:method, a:params])
  catch
  endtry
endfunction

function! s:CompleteDone() abort
  let l:shown = s:offered
  let s:offered = {}
  if empty(l:shown) || l:shown.buffer != bufnr('')
    return
  endif
  let l:item = v:completed_item
  let l:data = type(l:item) == v:t_dict && type(get(l:item, 'user_data', '')) == v:t_dict
        \ ? get(l:item.user_data, 'repomem', {}) : {}
  let l:word = get(l:item, 'word', '')
  let l:line = getline(l:shown.line + 1)
  if !empty(l:data) && strpart(l:line, l:data.start, len(l:word)) is# l:word
    if l:shown.id isnot v:null
      call s:Notify(l:shown.connection, 'repomem/didAccept', {'id': l:shown.id})
    endif
    if !empty(l:data.rest)
      " The lines after the first, below it; the cursor at the end of the last.
      let l:after = strpart(l:line, l:data.start + len(l:word))
      let l:rest = copy(l:data.rest)
      let l:rest[-1] .= l:after
      call setline(l:shown.line + 1, strpart(l:line, 0, l:data.start + len(l:word)))
      call append(l:shown.line + 1, l:rest)
      call cursor(l:shown.line + 1 + len(l:rest), len(l:data.rest[-1]) + 1)
    endif
  elseif l:shown.id isnot v:null
    " The menu closed without the item in the text (<C-e>, or typing past it).
    call s:Notify(l:shown.connection, 'repomem/didReject', {'id': l:shown.id})
  endif
endfunction

" The omnifunc is repomem's only in a repository: elsewhere ALE starts no server, and the
" filetype's own completion (python3complete, say) stays.
function! s:UseOmniFunc() abort
  if s:Root(bufnr('')) isnot# ''
    setlocal omnifunc=RepomemOmniFunc
  endif
endfunction

augroup repomem
  autocmd!
  execute 'autocmd FileType ' . join(s:filetypes, ',') . ' call s:UseOmniFunc()'
  autocmd CompleteDone * call s:CompleteDone()
  autocmd User ALELSPStarted call s:Started()
augroup END
