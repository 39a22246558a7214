import pytest

import xhal


def test_devices_lists_the_device_under_test(dev):
    entries = xhal.devices()
    labels = [e.label for e in entries]
    assert dev.label in labels
    entry = entries[labels.index(dev.label)]
    assert entry.backend == dev.backend and entry.index == dev.index
    assert entry.name == dev.name
    assert entry.type in {"cpu", "integrated-gpu", "discrete-gpu", "accelerator", "other"}
    assert entry.info["total_memory"] > 0
    assert isinstance(entry.info["features"], list)
    assert repr(entry).startswith("DeviceEntry('")


def test_a_selector_says_why(dev):
    chosen = xhal.device(dev.label)
    assert chosen.label == dev.label
    assert dev.label in chosen.why
    assert "xhal.device()" in chosen.why


@pytest.mark.parametrize("selector", ["nonesuch", "cpu:99", "type=", ",,"])
def test_a_bad_selector_raises_selection_error(selector):
    with pytest.raises(xhal.SelectionError) as caught:
        xhal.device(selector)
    assert isinstance(caught.value, ValueError)
    assert str(caught.value)


def test_doctor_reports_discovery(dev):
    report = xhal.doctor()
    names = [b["name"] for b in report["backends"]]
    assert dev.backend in names
    assert "plugins" in report["discovery"]


def test_an_entry_opens(dev):
    entry = next(e for e in xhal.devices() if e.label == dev.label)
    opened = entry.open()
    assert opened.label == dev.label
    assert opened != dev  # another open device, with its own streams
    opened.close()


def test_a_closed_device_refuses_everything(dev):
    other = xhal.device(dev.label)
    a = other.zeros(4)
    other.close()
    assert other.closed
    for use in (
        lambda: other.zeros(4),
        lambda: other.stream(),
        lambda: a.numpy(),
        lambda: other.load_wgsl("@compute @workgroup_size(1) fn main() {}"),
    ):
        with pytest.raises(xhal.InvalidHandleError, match="closed"):
            use()
    # The process is healthy: the device under test still works.
    assert dev.zeros(2).numpy().tolist() == [0.0, 0.0]


def test_a_device_is_a_context_manager(dev):
    with xhal.device(dev.label) as other:
        assert not other.closed
    assert other.closed
