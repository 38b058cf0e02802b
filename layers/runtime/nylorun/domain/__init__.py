"""The Runtime's own rules, independent of AWS and of the wire: task ids, who owns a task, when a context is
busy and which queued turn takes it next, where files live, and the errors these rules raise."""
