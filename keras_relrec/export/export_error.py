"""The error the export path raises."""


class ExportError(ValueError):
    """A model that cannot be exported as asked.

    The message is one line and names the layer at fault, so that the CLI
    can print it as the reason it failed.
    """
