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

(defcustom repomem-settings nil
  "Client settings sent as initializationOptions, a plist of camelCase keys.
For example (:strategy \"fragrel\" :maxNewTokens 32).
Only the keys set are sent: the server's defaults (and the
repository's repomem.toml) apply to the rest.  A boolean false is
:json-false (nil is sent as null: not set).  Invalid or unknown keys are
reported by the server and ignored.  The keys, with the server's
defaults (nil: the model that runs decides; lsp/README.md says more):
  :alpha                  0.5
  :topK                   10
  :retrievalBudgetMs      50
  :strategy               \"fragrel\"
      (one of infile, vanilla, dense, fragrel, fragrel-paper, repocoder,
       repocoder+fragrel, hat, memwalker, readagent, qrmem)
  :maxPromptTokens        nil
      (unset: 1,024 with the embedded model, 2,048 with a served one)
  :contextShare           0.5
  :maxSuffixTokens        64
  :maxNewTokens           64
  :order                  \"stable\"  (one of score, similarity, stable)
  :wordHealing            t
  :maxLines               16
  :deadlineSeconds        nil  (unset: 60; 180 with the 1.5B embedded model)
  :gpuLayers              -1
  :flashAttention         nil
      (unset: on with the embedded model, off elsewhere)
  :reuseChunkTokens       nil  (unset: 64 with the embedded model, 0 elsewhere)
  :embeddedLayers         \"auto\"  (one of auto, bf16, quantized)
  :embeddedModel          \"qwen2.5-coder-0.5b\"
      (one of qwen2.5-coder-0.5b, qwen2.5-coder-1.5b)
  :model                  \"\"
  :hfModel                \"\"
  :endpoint               \"\"
  :endpointLogprobs       t
  :fileOnlyRound          nil
      (unset: off with the embedded model, on with a served one)
  :debounceMs             75
  :answerWithinMs         8000
  :warmAfterMs            400
  :warmNewFunction        t
  :typeThrough            t
  :speculateBelow         :json-false
  :completionCacheEntries 256
  :indexNice              10
  :feedbackLog            \"\""
  :type 'plist
  :options '((:alpha number)
    (:topK integer)
    (:retrievalBudgetMs number)
    (:strategy (choice :value "fragrel" (const "infile") (const "vanilla") (const "dense") (const "fragrel") (const "fragrel-paper") (const "repocoder") (const "repocoder+fragrel") (const "hat") (const "memwalker") (const "readagent") (const "qrmem")))
    (:maxPromptTokens integer)
    (:contextShare number)
    (:maxSuffixTokens integer)
    (:maxNewTokens integer)
    (:order (choice :value "stable" (const "score") (const "similarity") (const "stable")))
    (:wordHealing (choice :value t (const :tag "true" t) (const :tag "false" :json-false)))
    (:maxLines integer)
    (:deadlineSeconds number)
    (:gpuLayers integer)
    (:flashAttention (choice :value t (const :tag "true" t) (const :tag "false" :json-false)))
    (:reuseChunkTokens integer)
    (:embeddedLayers (choice :value "auto" (const "auto") (const "bf16") (const "quantized")))
    (:embeddedModel (choice :value "qwen2.5-coder-0.5b" (const "qwen2.5-coder-0.5b") (const "qwen2.5-coder-1.5b")))
    (:model string)
    (:hfModel string)
    (:endpoint string)
    (:endpointLogprobs (choice :value t (const :tag "true" t) (const :tag "false" :json-false)))
    (:fileOnlyRound (choice :value t (const :tag "true" t) (const :tag "false" :json-false)))
    (:debounceMs integer)
    (:answerWithinMs integer)
    (:warmAfterMs integer)
    (:warmNewFunction (choice :value t (const :tag "true" t) (const :tag "false" :json-false)))
    (:typeThrough (choice :value t (const :tag "true" t) (const :tag "false" :json-false)))
    (:speculateBelow (choice :value :json-false (const :tag "true" t) (const :tag "false" :json-false)))
    (:completionCacheEntries integer)
    (:indexNice integer)
    (:feedbackLog string)))

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
