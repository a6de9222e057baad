"""Reading a model and tracing it, the first half of every export: the
`ExportPlan` worked out once from the model's graph, and the `serve`,
`step` and `initial_state` functions traced from the model and its plan.
"""
