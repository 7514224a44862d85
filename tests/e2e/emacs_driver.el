;;; emacs_driver.el --- drives repomem through eglot in batch Emacs  -*- lexical-binding: t; -*-

;;; Commentary:

;; Loaded after lsp/emacs/repomem.el by tests/e2e/test_emacs.py:
;;
;;   emacs --batch -Q -L <eglot> -l lsp/emacs/repomem.el -l tests/e2e/emacs_driver.el
;;
;; Environment: REPOMEM_TEST_PYTHON (the interpreter that runs `repomem serve'),
;; REPOMEM_TEST_WORKSPACE (a copy of examples/shop), REPOMEM_TEST_RESULTS (a file the result
;; lines are appended to as well as printed, so that a killed Emacs still leaves them).
;; Lines: "CHECK <name> ok|FAIL <json details>" and "INFO <key> <json value>".

;;; Code:

(require 'cl-lib)
(require 'json)
(require 'seq)
(require 'eglot)

(defvar drv-results-file (getenv "REPOMEM_TEST_RESULTS"))
(defvar drv-workspace (file-name-as-directory (getenv "REPOMEM_TEST_WORKSPACE")))
(defvar drv-line 9 "The unfinished line of shop/report.py (1-based).")
(defvar drv-completions nil
  "Every textDocument/completion request, newest first: (SECONDS RESPONSE ERROR).")
(defvar drv-server-messages nil "window/logMessage and window/showMessage texts, newest first.")
(defvar drv-configurations nil "The settings of each workspace/didChangeConfiguration sent.")

(defun drv-emit (line)
  (princ (concat line "\n"))
  (let ((coding-system-for-write 'utf-8))
    (write-region (concat line "\n") nil drv-results-file 'append 'silent)))

(defun drv-info (key value)
  (drv-emit (format "INFO %s %s" key (json-encode value))))

(defun drv-check (name ok details)
  (drv-emit (format "CHECK %s %s %s" name (if ok "ok" "FAIL") (json-encode (format "%s" details)))))

;;; Spies: what eglot asked and got, without changing it

(defun drv-spy-request (request connection method params &rest args)
  "Time each completion request and keep its answer or error."
  (if (not (eq method :textDocument/completion))
      (apply request connection method params args)
    (let ((start (float-time)))
      (condition-case err
          (let ((response (apply request connection method params args)))
            (push (list (- (float-time) start) response nil) drv-completions)
            response)
        (error (push (list (- (float-time) start) nil err) drv-completions)
               (signal (car err) (cdr err)))))))
(advice-add 'jsonrpc-request :around #'drv-spy-request)

(defun drv-spy-notify (connection method params)
  (when (eq method :workspace/didChangeConfiguration)
    (push (plist-get params :settings) drv-configurations))
  (ignore connection))
(advice-add 'jsonrpc-notify :before #'drv-spy-notify)

(defun drv-spy-notification (_server method &rest params)
  (when (memq method '(window/logMessage window/showMessage))
    (push (format "%s" (plist-get params :message)) drv-server-messages)))
(advice-add 'eglot-handle-notification :before #'drv-spy-notification)

;;; Helpers

(defun drv-wait (predicate seconds)
  "Let Emacs read the server until PREDICATE holds or SECONDS pass; PREDICATE's value."
  (let ((deadline (+ (float-time) seconds)))
    (while (and (not (funcall predicate)) (< (float-time) deadline))
      (accept-process-output nil 0.1))
    (funcall predicate)))

(defun drv-line-text (n)
  (save-excursion
    (goto-char (point-min))
    (forward-line (1- n))
    (buffer-substring-no-properties (point) (line-end-position))))

(defvar drv-tail nil "What follows the unfinished line in the file as shipped.")

(defun drv-set-line (n text)
  "Make line N TEXT (and what followed it in the file as shipped), point at the end of TEXT."
  (goto-char (point-min))
  (forward-line (1- n))
  (delete-region (point) (point-max))
  (insert text)
  (save-excursion (insert drv-tail)))

(defun drv-newest-item ()
  "The first item of the newest completion answer, or nil."
  (let ((response (nth 1 (car drv-completions))))
    (car (append (if (vectorp response) response (plist-get response :items)) nil))))

(defun drv-apply-edit (text edit)
  "TEXT with the LSP TextEdit EDIT applied (what the server says the buffer should become)."
  (with-temp-buffer
    (insert text)
    (cl-flet ((offset (position)
                ;; :character counts UTF-16 units (eglot 1.9 offers no other encoding): a
                ;; character beyond the BMP is two of them.
                (goto-char (point-min))
                (forward-line (plist-get position :line))
                (let ((units (plist-get position :character)))
                  (while (and (> units 0) (not (eolp)))
                    (setq units (- units (if (> (char-after) #xFFFF) 2 1)))
                    (forward-char 1)))
                (point)))
      (let* ((range (plist-get edit :range))
             (start (offset (plist-get range :start)))
             (end (offset (plist-get range :end))))
        (delete-region start end)
        (goto-char start)
        (insert (plist-get edit :newText))))
    (buffer-string)))

(defun drv-complete (text budget)
  "Set the unfinished line to TEXT and run `completion-at-point' until it changes the buffer.
An empty answer (the server is still generating) is asked again; an answer whose item
`completion-at-point' does not insert (filtered away) ends the attempts.  Returns a plist:
:seconds to the insertion, :tries, :before and :after (buffer texts), :item, :errors."
  (let ((start (float-time)) (tries 0) errors item before after point)
    (drv-set-line drv-line text)
    (setq before (buffer-substring-no-properties (point-min) (point-max)) point (point))
    (while (and (not after) (< (- (float-time) start) budget))
      (cl-incf tries)
      (goto-char point)
      (setq drv-completions (cons nil drv-completions)) ; no answer yet to this try
      (condition-case err (completion-at-point) (error (push err errors)))
      (setq item (drv-newest-item))
      (cond ((not (equal before (buffer-substring-no-properties (point-min) (point-max))))
             (setq after (buffer-substring-no-properties (point-min) (point-max))))
            (item (setq budget 0)) ; offered but not inserted: asking again changes nothing
            (t (accept-process-output nil 0.3))))
    (setq drv-completions (delq nil drv-completions))
    (list :seconds (and after (- (float-time) start)) :tries tries :before before :after after
          :item item :errors errors)))

(defun drv-check-completion (name text expected-line)
  "Complete after TEXT; the buffer must be what the item's textEdit says, line 9 EXPECTED-LINE
\(a string), start with PREFIX (EXPECTED-LINE (:prefix PREFIX)) or with TEXT (nil).  Returns the
result plist."
  (let* ((result (drv-complete text 40))
         (item (plist-get result :item))
         (edit (plist-get item :textEdit))
         (line (drv-line-text drv-line))
         (expected (and edit (drv-apply-edit (plist-get result :before) edit))))
    (drv-check
     name
     (and (plist-get result :after) expected (equal (plist-get result :after) expected)
          (cond ((stringp expected-line) (equal line expected-line))
                ((consp expected-line) (string-prefix-p (plist-get expected-line :prefix) line))
                (t (string-prefix-p text line))))
     (cond ((plist-get result :errors) (format "errors %S" (plist-get result :errors)))
           ((not item) (format "no completion offered in %d tries" (plist-get result :tries)))
           ((not (plist-get result :after))
            (format "item offered but completion-at-point inserted nothing (filtered away \
against the symbol before point?): label %S insertText %S filterText %S textEdit %S"
                    (plist-get item :label) (plist-get item :insertText)
                    (plist-get item :filterText) edit))
           (t (format "line 9 %S after %.1f s (%d tries); item textEdit %S%s" line
                      (plist-get result :seconds) (plist-get result :tries) edit
                      (if (equal (plist-get result :after) expected) ""
                        (format "; the buffer differs from what the textEdit gives: %S"
                                expected))))))
    result))

(defun drv-accepted-ids (result)
  (let ((id (plist-get (plist-get (plist-get result :item) :data) :id)))
    (and (plist-get result :after) id (list id))))

;;; The session

(defun drv-run ()
  (let (server accepted (started (float-time)))
    (setq repomem-server-command (list (getenv "REPOMEM_TEST_PYTHON") "-m" "repomem" "serve")
          repomem-settings '(:maxNewTokens 24 :maxPromptTokens 1024 :debounceMs 10)
          eglot-sync-connect t
          eglot-connect-timeout 120
          ;; "No match" / "Sole completion" would each sleep minibuffer-message-timeout
          ;; seconds in batch mode (sit-for is sleep-for there).
          completion-show-inline-help nil)
    (drv-info "emacs_version" emacs-version)
    (drv-info "eglot_version" (repomem--eglot-version))
    (find-file (expand-file-name "shop/report.py" drv-workspace))
    (setq drv-tail (save-excursion (goto-char (point-min)) (forward-line (1- drv-line))
                                   (buffer-substring-no-properties (line-end-position) (point-max))))
    ;; python-mode-hook ran eglot-ensure (repomem-autostart), which connects once the command
    ;; that opened the file ends: as Emacs's command loop would.
    (run-hooks 'post-command-hook)
    (setq server (eglot-current-server))
    (when server
      (drv-info "server_pid" (process-id (jsonrpc--process server)))
      (drv-info "project_root" (expand-file-name (project-root (eglot--project server)))))
    ;; a) attached and ready
    (let ((ready (and server
                      (drv-wait (lambda () (cl-some (lambda (m) (string-match-p "repomem: ready" m))
                                                    drv-server-messages))
                                240))))
      (drv-info "ready_s" (- (float-time) started))
      (drv-check "attach" (and ready (bound-and-true-p eglot--managed-mode)
                               (repomem--server-p server)
                               (file-equal-p (project-root (eglot--project server)) drv-workspace))
                 (format "server %S managed %S ready %S root %S messages %S"
                         (and server (jsonrpc-name server))
                         (bound-and-true-p eglot--managed-mode) ready
                         (and server (project-root (eglot--project server)))
                         (reverse drv-server-messages))))
    (unless server (error "eglot did not start repomem"))
    (drv-check "settings" (cl-some (lambda (s) (equal (plist-get s :repomem) repomem-settings))
                                   drv-configurations)
               (format "workspace/didChangeConfiguration settings sent: %S" drv-configurations))
    ;; b) the shipped line
    (let ((result (drv-check-completion "complete_line" "    return "
                                        "    return compute_tax(amount_cents, tax_class)")))
      (drv-info "first_answer_s" (plist-get result :seconds))
      (setq accepted (append accepted (drv-accepted-ids result))))
    ;; c) a partial word before point is replaced, not doubled nor filtered away
    (setq accepted (append accepted (drv-accepted-ids
                                     (drv-check-completion "complete_word" "    return com"
                                                           "    return compute_tax(amount_cents, tax_class)"))))
    ;; c') the same after an emoji on the line (two UTF-16 units, one Emacs character)
    (setq accepted (append accepted (drv-accepted-ids
                                     (drv-check-completion
                                      "after_emoji" (concat "    label = \"" (string #x1F642) "\"; return com")
                                      ;; the model may go on past the call (` * label')
                                      (list :prefix (concat "    label = \"" (string #x1F642)
                                                            "\"; return compute_tax("))))))
    ;; d) inside a call: exactly the item's textEdit, the rest of the line untouched
    (setq accepted (append accepted (drv-accepted-ids
                                     (drv-check-completion "complete_in_call"
                                                           "    return int(amount_cents" nil))))
    (drv-info "accepted_ids" (vconcat accepted))
    ;; e) candidates asked for but not inserted
    (drv-set-line drv-line "    return round(amount_cents")
    (let* ((before (buffer-string)) (point (point)) (deadline (+ (float-time) 40)) offered)
      (while (and (not offered) (< (float-time) deadline))
        (goto-char point)
        (let ((capf (run-hook-wrapped 'completion-at-point-functions
                                      (lambda (f) (and (functionp f) (funcall f))))))
          (setq offered (and capf (car (all-completions "" (nth 2 capf))))))
        (unless offered (accept-process-output nil 0.3)))
      (let ((id (and offered
                     (plist-get (plist-get (get-text-property 0 'eglot--lsp-item offered) :data) :id))))
        (drv-info "offered_id" id)
        (drv-check "offered_not_inserted" (and id (equal before (buffer-string))
                                               (not (member id accepted)))
                   (format "offered %S id %S (accepted %S); buffer unchanged %S" offered id accepted
                           (equal before (buffer-string))))))
    ;; f) a request that outlasts the server's answer budget (100 ms here, 8 s by default, below
    ;; eglot's 10 s) gets an empty incomplete list, not an error; asking again at the same spot
    ;; gets the completion, which went on meanwhile.
    (setq repomem-settings (plist-put (copy-sequence repomem-settings) :answerWithinMs 100))
    (eglot-signal-didChangeConfiguration server)
    (let* ((asked (length drv-completions))
           (result (drv-complete "    return int(compute_tax(" 40))
           (answers (reverse (butlast drv-completions asked)))
           (first (car answers))
           (items (plist-get (nth 1 first) :items)))
      (drv-info "pending_then_answered" (length answers))
      (drv-check "slow_first_request"
                 (and first (null (nth 2 first)) (< (car first) 9)
                      (eq (plist-get (nth 1 first) :isIncomplete) t) (seq-empty-p items)
                      (plist-get result :after) (null (plist-get result :errors)))
                 (format "first answer %S after %.1f s; inserted %S after %S s and %d asks; errors %S"
                         (nth 1 first) (or (car first) -1)
                         (drv-line-text drv-line) (plist-get result :seconds) (length answers)
                         (or (plist-get result :errors) (nth 2 first)))))
    ;; no request timed out (eglot's limit is jsonrpc's 10 s), every answer in time
    (let* ((errors (delq nil (mapcar #'cl-third drv-completions)))
           (slowest (apply #'max 0 (mapcar #'car drv-completions))))
      (drv-info "completion_requests" (length drv-completions))
      (drv-info "slowest_request_s" slowest)
      (drv-check "no_timeouts" (and (null errors) (< slowest 10))
                 (format "%d requests, slowest %.1f s, errors %S" (length drv-completions)
                         slowest errors)))
    ;; M-x repomem-explain
    (condition-case err
        (progn
          (repomem-explain)
          (let ((text (with-current-buffer "*repomem explain*" (buffer-string))))
            (drv-check "explain" (string-match-p "^ 1 shop/" text) text)))
      (error (drv-check "explain" nil err)))
    ;; The protocol log and the server's stderr, for the test to show when a check fails.
    (let ((events (getenv "REPOMEM_TEST_EVENTS")))
      (when events
        (with-current-buffer (jsonrpc-events-buffer server) (write-region nil nil events nil 'silent))
        (with-current-buffer (jsonrpc-stderr-buffer server)
          (write-region nil nil (concat events ".stderr") nil 'silent))))
    ;; g) a polite shutdown; the test then checks that no process is left
    (set-buffer-modified-p nil)
    (condition-case err
        (let ((start (float-time)))
          (eglot-shutdown server)
          (drv-check "shutdown" (not (jsonrpc-running-p server))
                     (format "in %.1f s" (- (float-time) start))))
      (error (drv-check "shutdown" nil err)))))

(condition-case err
    (drv-run)
  (error (drv-check "driver" nil (format "error %S; server messages %S" err
                                         (reverse drv-server-messages)))
         (ignore-errors (eglot-shutdown-all))
         (kill-emacs 1)))
(drv-emit "DONE")
(kill-emacs 0)

;;; emacs_driver.el ends here
