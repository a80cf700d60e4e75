

def test_validation_plots_label_axes_and_show_the_band(tmp_path, monkeypatch):
    """bias_by_source / scatter / error_breakdown: signed error on linear axes with units,
    legends and titles, each row's interval drawn."""
    from dse.report import validation_plots as vp
    from tests.test_memory_margin import ROW
    figs = []
    monkeypatch.setattr(vp, "save_fig", lambda fig, path, dpi=130: figs.append(fig))
    monkeypatch.setattr(vp.plt, "close", lambda fig: None)
    pred = predict_frame(pd.DataFrame([ROW, dict(ROW, id=2, source="U", measured_iter_time_s=5.0)]), "t")
    pred["error"] = (pred["predicted_iter_time_s"] - pred["measured_iter_time_s"]) / pred["measured_iter_time_s"]
    vp.bias_by_source(pred, tmp_path / "b.png")
    vp.scatter(pred, tmp_path / "s.png")
    vp.error_breakdown(pred, tmp_path / "e.png")
    for fig in figs:
        for ax in fig.axes:
            assert ax.get_xlabel() or ax.get_xticklabels()
            assert "(%)" in ax.get_ylabel() or "(s)" in ax.get_ylabel()
            assert ax.get_title() and ax.get_legend() is not None
    bias_ax = figs[0].axes[0]
    assert bias_ax.get_yscale() == "linear" and "signed error" in bias_ax.get_ylabel()
    assert figs[1].axes[1].get_yscale() == "linear"
    assert any("interval" in t.get_text() for t in bias_ax.get_legend().get_texts())
