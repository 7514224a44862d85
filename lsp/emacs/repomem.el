;;; repomem.el --- repomem completions in Emacs through eglot  -*- lexical-binding: t; -*-

;;; Commentary:

;; Load it from init.el:
;;
;;   (load "/path/to/repomem/lsp/emacs/repomem.el")
;;   (setq repomem-settings '(:maxNewTokens 32))   ; optional, see the README's settings
;;
;; Needs Emacs 28+ and eglot 1.9+ (built into Emacs 29; on 28 `apt-get install elpa-eglot'
;; or M-x package-install RET eglot).  `repomem' must be on PATH, or set
;; `repomem-server-command'.
;;
;; Buffers of the languages repomem indexes then start (or join) one `repomem serve' per
;; project.  Eglot gives a major mode one server, so repomem takes the place of pylsp,
;; clangd, ... in those buffers.
;;
;; - C-M-i (`completion-at-point') asks for the completion at point: one candidate, the
;;   whole completion.  Completing it reports the acceptance (repomem/didAccept) to the
;;   local feedback log, `.repomem/feedback.jsonl'.  Eglot never runs an item's command,
;;   so this file does it from the completion's exit function.
;; - M-x repomem-explain lists the repository fragments behind the completion at point.

;;; Code:

(require 'cl-lib)
(require 'seq)

(defgroup repomem nil
  "Repository-aware code completion through eglot."
  :group 'tools
  :prefix "repomem-")

(defcustom repomem-server-command '("repomem" "serve")
  "The program and arguments that start the language server (stdio).
Read whenever eglot starts a server."
  :type '(repeat string))

(require 'repomem-settings
         (expand-file-name "repomem-settings"
                           (file-name-directory (or load-file-name (bound-and-true-p byte-compile-current-file)
                                                   buffer-file-name))))

(defcustom repomem-modes
  '(python-mode python-ts-mode js-mode js-ts-mode typescript-mode typescript-ts-mode
    tsx-ts-mode go-mode go-ts-mode rust-mode rust-ts-mode java-mode java-ts-mode
    kotlin-mode kotlin-ts-mode scala-mode scala-ts-mode c-mode c-ts-mode c++-mode c++-ts-mode
    csharp-mode csharp-ts-mode ruby-mode ruby-ts-mode php-mode php-ts-mode swift-mode
    lua-mode lua-ts-mode sh-mode bash-ts-mode)
  "Major modes served by repomem (set it before loading this file).
One entry in `eglot-server-programs' lists them all, so that a project
has one server (one index, one model) whatever its languages.  Modes
that do not exist here are harmless."
  :type '(repeat symbol))

(defcustom repomem-autostart t
  "Non-nil: buffers of `repomem-modes' start or join the project's server.
That is `eglot-ensure' in their mode hooks, for files in a repository (a
folder above with .git, repomem.toml or .repomem); set it before loading
this file."
  :type 'boolean)

(defcustom repomem-cursor-idle 0.3
  "Seconds point must rest before repomem is told where it is; nil: never.
The server then starts the completion at point speculatively, so that
C-M-i there finds it ready or under way (repomem/didMoveCursor)."
  :type '(choice (const :tag "Never" nil) number))

(defconst repomem--eglot-needed "1.9"
  "The oldest eglot whose completion items and exit function this file knows.")

(defvar eglot-server-programs)
(defvar eglot-lsp-context)
(declare-function eglot-current-server "eglot")
(declare-function eglot--current-server-or-lose "eglot")
(declare-function eglot--server-info "eglot")
(declare-function eglot--TextDocumentPositionParams "eglot")
(declare-function eglot--signal-textDocument/didChange "eglot")
(declare-function jsonrpc-notify "jsonrpc")
(declare-function jsonrpc-request "jsonrpc")
(declare-function lm-version "lisp-mnt")
(declare-function package-desc-version "package")
(declare-function eglot-ensure "eglot")

;;; Starting the server

(defun repomem--initialization-options (_server)
  "The initializationOptions: `repomem-settings' when a server starts."
  (or repomem-settings (make-hash-table)))

(defun repomem--contact (_interactive)
  "How eglot starts repomem (an `eglot-server-programs' contact function)."
  (append repomem-server-command
          (list :initializationOptions #'repomem--initialization-options)))

(defun repomem--server-p (server)
  "Non-nil if SERVER is a repomem language server."
  (and server (equal (plist-get (eglot--server-info server) :name) "repomem")))

(defun repomem--with-settings (configuration server &rest args)
  "Add `repomem-settings' to the workspace configuration of a repomem SERVER.
Eglot sends workspace/didChangeConfiguration with the user's
`eglot-workspace-configuration' (right after connecting, and on
`eglot-signal-didChangeConfiguration'); with this, a changed
`repomem-settings' reaches a running server too.  The server takes
the section as every setting in force, so it is sent when empty too:
a setting removed from `repomem-settings' is then unset there.
CONFIGURATION is eglot's function, ARGS its other arguments."
  (let ((settings (apply configuration server args)))
    (if (or (not (repomem--server-p server))
            (and (listp settings) (plist-member settings :repomem)))
        settings
      (append (list :repomem (or repomem-settings (make-hash-table))) settings))))

(defun repomem--marked-root (directory)
  "The nearest folder above DIRECTORY with repomem.toml or .repomem, or nil.
~/.repomem does not count: it would make the home folder one project."
  (or (locate-dominating-file directory "repomem.toml")
      (locate-dominating-file
       directory
       (lambda (dir) (and (not (file-equal-p dir "~"))
                          (file-directory-p (expand-file-name ".repomem" dir)))))))

(defun repomem--project (directory)
  "For eglot: the nearest folder above DIRECTORY with repomem.toml or .repomem.
Used when no version control root is found, so that the server indexes
the whole repository and not the folder of the first file opened."
  (when (bound-and-true-p eglot-lsp-context)
    (let ((root (repomem--marked-root directory)))
      (and root (cons 'transient (expand-file-name root))))))

(defun repomem--ensure ()
  "Start repomem for a file that is in a repository, as the Neovim and Vim
set-ups do: a folder above it with .git, repomem.toml or .repomem.  For a
file in none, eglot would make the file's own folder (the home folder,
say) the workspace, and the server would index all of it."
  (when (and buffer-file-name
             (let ((directory (file-name-directory buffer-file-name)))
               (or (locate-dominating-file directory ".git")
                   (repomem--marked-root directory))))
    (eglot-ensure)))

;;; Reporting accepted completions

(defun repomem--item (table proxy)
  "The LSP completion item behind PROXY, a candidate of eglot's TABLE.
Completing from the *Completions* buffer hands over the text without its
properties; eglot then finds the candidate by its text, and so does this."
  (or (get-text-property 0 'eglot--lsp-item proxy)
      (let ((candidate (cl-find proxy (all-completions "" table) :test #'string=)))
        (and candidate (get-text-property 0 'eglot--lsp-item candidate)))))

(defun repomem--report-accepts (capf)
  "Wrap the exit function of CAPF, eglot's completion, to report accepts.
The exit function inserts the item (its textEdit) when its status is
`finished' or `exact', a candidate completed; it is then reported with
repomem/didAccept.  A dismissed completion sends nothing."
  (let ((server (and capf (eglot-current-server))))
    (if (not (and (consp capf) (repomem--server-p server)))
        capf
      (pcase-let* ((`(,start ,end ,table . ,properties) capf)
                   (exit (plist-get properties :exit-function)))
        `(,start ,end ,table
                 ,@(plist-put
                    (copy-sequence properties) :exit-function
                    (lambda (proxy status)
                      (let ((item (and (memq status '(finished exact))
                                       (repomem--item table proxy))))
                        (when exit (funcall exit proxy status))
                        (let ((id (plist-get (plist-get item :data) :id)))
                          (when (and (equal (plist-get item :detail) "repomem") (stringp id))
                            (jsonrpc-notify server :repomem/didAccept (list :id id))))))))))))

;;; Telling the server where point rests

(defvar repomem--cursor-timer nil "The idle timer of `repomem--report-cursor'.")
(defvar-local repomem--reported nil "The buffer state and point last reported.")
(defvar eglot--managed-mode)

(defun repomem--report-cursor ()
  "Tell the current buffer's repomem server where point rests, once per place.
Pending edits go first, so the position is read against the text the
server has."
  (let ((server (and (bound-and-true-p eglot--managed-mode) (eglot-current-server)))
        (here (list (current-buffer) (buffer-modified-tick) (point))))
    (when (and (repomem--server-p server) (not (equal here repomem--reported)))
      (setq repomem--reported here)
      (eglot--signal-textDocument/didChange)
      (jsonrpc-notify server :repomem/didMoveCursor (eglot--TextDocumentPositionParams)))))

;;; Explaining a completion

(defun repomem-explain ()
  "Show the repository fragments behind the completion at point, with their scores."
  (interactive)
  (let ((server (eglot--current-server-or-lose)))
    (eglot--signal-textDocument/didChange) ; the server explains the text as it is now
    (let* ((answer (jsonrpc-request server :workspace/executeCommand
                                    (list :command "repomem.explain"
                                          :arguments (vector (eglot--TextDocumentPositionParams)))
                                    :timeout 30))
           (fragments (plist-get answer :fragments)))
      (with-help-window "*repomem explain*"
        (princ (format "repomem: the fragments behind %s:%s:%s (strategy %s)\n\n"
                       (plist-get answer :path) (1+ (or (plist-get answer :line) 0))
                       (plist-get answer :character) (plist-get answer :strategy)))
        (when (plist-get answer :error)
          (princ (format "%s\n" (plist-get answer :error))))
        (when (seq-empty-p fragments)
          (princ "No fragments (is the index ready?).\n"))
        (seq-doseq (fragment fragments)
          (let ((lift (plist-get fragment :lifted_by)))
            (princ (format "%2d %s:%d-%d  s_ind=%.2f s_env=%.2f s_rel=%.2f%s\n"
                           (plist-get fragment :rank) (plist-get fragment :path)
                           (plist-get fragment :start_line) (plist-get fragment :end_line)
                           (plist-get fragment :s_ind) (plist-get fragment :s_env)
                           (plist-get fragment :s_rel)
                           (if lift
                               (format "  <- %s:%d-%d (w=%.3f)" (plist-get lift :path)
                                       (plist-get lift :start_line) (plist-get lift :end_line)
                                       (plist-get lift :weight))
                             "")))))))))

;;; Setting up

(defun repomem--eglot-version ()
  "The installed eglot's version, or nil when it cannot be told (no source)."
  (let ((source (locate-library "eglot.el")))
    (or (and source (require 'lisp-mnt) (lm-version source))
        (let ((package (and (boundp 'package-alist) (cadr (assq 'eglot package-alist)))))
          (and package (fboundp 'package-version-join)
               (package-version-join (package-desc-version package)))))))

(defun repomem--setup ()
  "Register repomem with eglot (run once eglot is loaded)."
  (setq eglot-server-programs
        (cons (cons repomem-modes #'repomem--contact)
              (cl-remove #'repomem--contact eglot-server-programs :key #'cdr-safe)))
  (advice-add 'eglot-completion-at-point :filter-return #'repomem--report-accepts)
  (advice-add 'eglot--workspace-configuration-plist :around #'repomem--with-settings)
  (when (and repomem-cursor-idle (not repomem--cursor-timer))
    (setq repomem--cursor-timer (run-with-idle-timer repomem-cursor-idle t #'repomem--report-cursor)))
  (add-hook 'project-find-functions #'repomem--project 50))

(let ((version (and (locate-library "eglot") (repomem--eglot-version))))
  (cond ((not (locate-library "eglot"))
         (message "repomem: needs eglot %s or newer (built into Emacs 29; on Emacs 28 \
`apt-get install elpa-eglot' or M-x package-install RET eglot)" repomem--eglot-needed))
        ((and version (version< version repomem--eglot-needed))
         (message "repomem: needs eglot %s or newer, found %s (M-x package-install RET eglot)"
                  repomem--eglot-needed version))
        (t
         (with-eval-after-load 'eglot (repomem--setup))
         (when repomem-autostart
           (autoload 'eglot-ensure "eglot")
           (dolist (mode repomem-modes)
             (add-hook (intern (format "%s-hook" mode)) #'repomem--ensure))))))

(provide 'repomem)
;;; repomem.el ends here
