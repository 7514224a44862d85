;;; repomem-settings.el --- the client settings repomem.el and repomem-lsp-mode.el send  -*- lexical-binding: t; -*-

;;; Commentary:

;; One option for both Emacs set-ups (eglot's repomem.el and lsp-mode's repomem-lsp-mode.el),
;; loaded by each from the folder it lies in: the server's settings are listed once, with the
;; server's defaults for an editor (tests/unit/test_editor_docs.py keeps them equal).

;;; Code:

(defcustom repomem-settings nil
  "Client settings sent as initializationOptions, a plist of camelCase keys.
For example (:strategy \"fragrel\" :maxNewTokens 32 :debounceMs 75).
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
  :continueLines          t
  :maxLines               16
  :deadlineSeconds        nil  (unset: 60; 180 with the 1.5B embedded model)
  :gpuLayers              -1
  :flashAttention         nil
      (unset: on with the embedded model, off elsewhere)
  :reuseChunkTokens       nil  (unset: 64 with the embedded model, 0 elsewhere)
  :embeddedLayers         \"auto\"  (one of auto, bf16, int8, quantized)
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
  :lineAhead              :json-false
  :speculateBelow         t
  :completionCacheEntries 256
  :indexNice              10
  :feedbackLog            \"\""
  :type 'plist
  :group 'repomem
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
    (:continueLines (choice :value t (const :tag "true" t) (const :tag "false" :json-false)))
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
    (:lineAhead (choice :value :json-false (const :tag "true" t) (const :tag "false" :json-false)))
    (:speculateBelow (choice :value t (const :tag "true" t) (const :tag "false" :json-false)))
    (:completionCacheEntries integer)
    (:indexNice integer)
    (:feedbackLog string)))

(provide 'repomem-settings)

;;; repomem-settings.el ends here
