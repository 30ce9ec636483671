"""The call layer between the judging methods and the backends: the per-call context (Judge), the call cache with
its in-flight sharing, the typed call record and the concurrent fan-out. Methods -> calls -> backends."""
