"""Analysis: the audits, plots, figures, the UMAP maps, the browser widget and executing the notebooks."""
