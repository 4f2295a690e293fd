"""The shapes a power law is tested against (icl.analysis.shapes) and the estimands printed beside
the deciding exponent (icl.analysis.exponents): each recovers what it should on curves of known form."""
import math

import numpy as np
import pytest

from icl.analysis import exponents, shapes

L = np.array([4.0, 6, 8, 12, 16, 32, 64])


def test_each_alternative_fits_its_own_curve_exactly_and_not_the_others():
    expo = 0.3 + 0.5 * np.exp(-(L - 4) / 8)
    logc = 0.3 + 0.5 * shapes.log_corrected(L / 4)
    power = 0.3 + 0.5 * (L / 4) ** -0.5
    assert shapes.exponential_rss(L, expo) < 1e-8
    assert shapes.log_corrected_rss(L, logc, 4) < 1e-12
    assert shapes.exponential_rss(L, power) > 1e-4 and shapes.log_corrected_rss(L, power, 4) > 1e-4


def test_a_power_law_stands_an_exponential_fails_and_an_alternative_as_good_as_it_stops_a_verdict():
    assert shapes.reading({"exponential": -50.0, "log-corrected": -40.0}, True) == (True, "")
    assert shapes.reading({"exponential": 12.0, "log-corrected": -40.0}, True)[0] is False
    assert shapes.reading({"exponential": 12.0, "log-corrected": -40.0}, None)[0] is False
    assert shapes.reading({"exponential": 3.0, "log-corrected": -40.0}, False)[0] is None  # better, not decisive
    assert shapes.reading({"exponential": -1.0, "log-corrected": -40.0}, True)[0] is None  # as good, says otherwise
    assert shapes.reading({"exponential": -1.0, "log-corrected": -40.0}, False)[0] is False  # as good, agrees
    assert shapes.reading({"exponential": -40.0, "log-corrected": -1.0}, False)[0] is None
    assert shapes.reading({"exponential": -40.0, "log-corrected": -1.0}, True)[0] is True


@pytest.mark.parametrize("alpha", [0.5, 1.0, 1.5])
def test_the_floor_free_estimand_and_the_local_exponents_recover_a_power_law_with_any_floor(alpha):
    depths = np.array([1.0, 2, 3, 4, 6, 8, 12, 16, 32, 64])
    curve = 0.4 + 0.5 * depths**-alpha
    rng = np.random.default_rng(0)
    matrix = curve * np.exp(rng.normal(0, 1e-6, (5, len(depths))))
    e, why = exponents.floor_free(depths, matrix, 4)
    assert why == "" and e.value == pytest.approx(alpha, abs=1e-3) and e.has_interval
    local = exponents.local_exponents(depths, matrix)
    assert [x["from"] for x in local][:3] == [1, 2, 3]
    assert all(x["alpha"] == pytest.approx(alpha, abs=1e-3) for x in local)


def test_the_floor_free_estimand_says_why_where_it_cannot_be_read():
    depths = np.array([1.0, 2, 4, 8, 16, 32, 64])
    rising = np.tile(0.2 + 0.01 * depths, (3, 1))
    assert exponents.floor_free(depths, rising, 4)[0] is None
    assert "fewer than 3" in exponents.floor_free(depths, rising, 16)[1]


def test_a_fit_whose_best_floor_is_zero_is_read_as_a_pure_power_law():
    depths = np.array([1.0, 2, 4, 8, 16, 32, 64])
    matrix = np.tile(0.5 / depths, (3, 1)) * np.exp(np.random.default_rng(1).normal(0, 1e-3, (3, len(depths))))
    reading = exponents.read_exponent(depths, matrix, 1)
    assert reading["problem"] == "" and reading["alpha"].value == pytest.approx(1.0, abs=0.01)
    assert math.isfinite(reading["alpha"].ci95[0])
