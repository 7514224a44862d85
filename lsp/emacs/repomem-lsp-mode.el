;;; repomem-lsp-mode.el --- repomem completions in Emacs through lsp-mode  -*- lexical-binding: t; -*-

;;; Commentary:

;; For users of lsp-mode (8.0+) rather than eglot (for eglot: repomem.el).  Load it from
;; init.el after lsp-mode:
;;
;;   (require 'lsp-mode)
;;   (load "/path/to/repomem/lsp/emacs/repomem-lsp-mode.el")
;;   (setq repomem-settings '(:maxNewTokens 32))   ; optional, see the README's settings
;;   (add-hook 'python-mode-hook #'lsp)             ; as for any lsp-mode server
;;
;; Debian 12: `apt-get install elpa-lsp-mode elpa-company'.  `repomem' must be on PATH, or set
;; `repomem-server-command'.
;;
;; repomem registers as an lsp-mode client of a high priority for the languages it indexes,
;; so lsp-mode starts it (one server per project root) in their buffers.  Completion is
;; lsp-mode's: company's pop-up (company-mode, which lsp-mode turns on where company is
;; installed), or C-M-i (`completion-at-point'); the one candidate is the whole completion,
;; replacing the word being typed.  Choosing it in company's pop-up runs the item's command,
;; which reports the acceptance (repomem.didAccept) to the local feedback log,
;; `.repomem/feedback.jsonl'.  C-M-i inserts it without that report: lsp-mode's completion
;; table never calls the exit function of `completion-at-point', which runs the command.

;;; Code:

(require 'lsp-mode)

(defgroup repomem nil
  "Repository-aware code completion."
  :group 'tools
  :prefix "repomem-")

(defcustom repomem-server-command '("repomem" "serve")
  "The program and arguments that start the language server (stdio).
Read whenever lsp-mode starts a server."
  :type '(repeat string))

(require 'repomem-settings
         (expand-file-name "repomem-settings"
                           (file-name-directory (or load-file-name (bound-and-true-p byte-compile-current-file)
                                                   buffer-file-name))))

(defcustom repomem-lsp-languages
  '("python" "javascript" "javascriptreact" "typescript" "typescriptreact" "go" "rust" "java" "kotlin"
    "scala" "c" "cpp" "csharp" "ruby" "php" "swift" "lua" "shellscript")
  "lsp-mode language ids (`lsp-language-id-configuration') repomem serves."
  :type '(repeat string))

(defun repomem-lsp--in-repository (file-name)
  "Whether FILE-NAME is in a repository: a folder above it with .git or
repomem.toml, else one with an index (.repomem) other than the home folder.
For a file in none, lsp-mode would make its folder (the home folder, say)
the workspace, and the server would index all of it."
  (let ((directory (file-name-directory file-name)))
    (or (locate-dominating-file directory ".git")
        (locate-dominating-file directory "repomem.toml")
        (locate-dominating-file
         directory
         (lambda (dir) (and (not (file-equal-p dir "~"))
                            (file-directory-p (expand-file-name ".repomem" dir))))))))

;; The index folder changes at every save of the index: watched, each change came back to the
;; server as a file event (lsp-mode watches every folder of the project by default).
(add-to-list 'lsp-file-watch-ignored-directories "[/\\\\]\\.repomem\\'")

(defun repomem-lsp--initialization-options ()
  "The initializationOptions: `repomem-settings' under a \"repomem\" key."
  (list :repomem (or repomem-settings (make-hash-table))))

(lsp-register-client
 (make-lsp-client
  :new-connection (lsp-stdio-connection (lambda () repomem-server-command))
  :activation-fn (lambda (file-name _mode)
                   (and file-name
                        (member (lsp-buffer-language) repomem-lsp-languages)
                        (repomem-lsp--in-repository file-name)))
  :priority 10  ; above the languages' own servers: repomem is the completion engine here
  :server-id 'repomem
  :initialization-options #'repomem-lsp--initialization-options))


(provide 'repomem-lsp-mode)
;;; repomem-lsp-mode.el ends here
