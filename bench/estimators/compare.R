# compare.R: independent checks for bench/estimators (issue #6), run by run.sh when R is available.
#   1. Gaussian marginal-likelihood ML (mu, tau2) with heteroscedastic n: stats::optim (BFGS on
#      (mu, log tau2)) on gauss.csv, versus our Brent-on-the-profile-score estimate (ours.txt).
#   2. Beta-binomial ML: VGAM::vglm(cbind(z, n - z) ~ 1, betabinomial) on beta.csv, converted from
#      (mu, rho) to alpha = mu (1 - rho)/rho, beta = (1 - mu)(1 - rho)/rho.
#   3. 3-component mixture, 1-D, equal noise: mclust::Mclust(x, G = 3, modelNames = "V") (unequal
#      variances, the same model as our homoscedastic EM), with its documented large-data
#      initialization (hierarchical clustering on a random subset of 2000 points); elapsed time and
#      log-likelihood, and mclust's em() alone started from that initialization.
# Usage: Rscript compare.R DIR   (DIR holds gauss.csv, beta.csv, mixture.csv, ours.txt)
args <- commandArgs(trailingOnly = TRUE)
dir <- args[1]
ours <- read.table(file.path(dir, "ours.txt"), col.names = c("k", "v"))
o <- setNames(ours$v, ours$k)
rel <- function(a, b) abs(a - b) / max(abs(a), abs(b))

g <- read.csv(file.path(dir, "gauss.csv"))
s2 <- 0.25 / g$n
nll <- function(p) { v <- exp(p[2]) + s2; 0.5 * sum(log(2 * pi * v) + (g$x - p[1])^2 / v) }
fit <- optim(c(mean(g$x), log(var(g$x))), nll, method = "BFGS",
             control = list(reltol = 1e-15, maxit = 1000))
cat(sprintf("R optim gaussian:  mu %.10f tau2 %.10f loglik %.6f | ours mu %.10f tau2 %.10f loglik %.6f | rel diff mu %.1e tau2 %.1e loglik %.1e\n",
            fit$par[1], exp(fit$par[2]), -fit$value, o["gauss_mu"], o["gauss_tau2"], o["gauss_loglik"],
            rel(fit$par[1], o["gauss_mu"]), rel(exp(fit$par[2]), o["gauss_tau2"]),
            rel(-fit$value, o["gauss_loglik"])))

suppressPackageStartupMessages(library(VGAM))
b <- read.csv(file.path(dir, "beta.csv"))
bf <- vglm(cbind(z, n - z) ~ 1, betabinomial, data = b, control = vglm.control(epsilon = 1e-12, maxit = 100))
cf <- Coef(bf)
mu <- cf[["mu"]]; rho <- cf[["rho"]]
a <- mu * (1 - rho) / rho; bb <- (1 - mu) * (1 - rho) / rho
bll <- sum(lchoose(b$n, b$z) + lbeta(a + b$z, bb + b$n - b$z) - lbeta(a, bb))
cat(sprintf("R VGAM betabinomial: alpha %.8f beta %.8f loglik %.6f | ours alpha %.8f beta %.8f loglik %.6f | rel diff alpha %.1e beta %.1e loglik %.1e\n",
            a, bb, bll, o["beta_alpha"], o["beta_beta"], o["beta_loglik"],
            rel(a, o["beta_alpha"]), rel(bb, o["beta_beta"]), rel(bll, o["beta_loglik"])))

suppressPackageStartupMessages(library(mclust))
x <- read.csv(file.path(dir, "mixture.csv"))$x
set.seed(1)
sub <- sample(length(x), 2000)
t <- system.time(mc <- Mclust(x, G = 3, modelNames = "V", initialization = list(subset = sub),
                              verbose = FALSE))
cat(sprintf("R mclust Mclust(G=3, V, subset 2000): %.1f ms elapsed, loglik %.4f | ours loglik %.4f | diff %.2e\n",
            1000 * t[["elapsed"]], mc$loglik, o["mix_loglik"], mc$loglik - o["mix_loglik"]))
init <- mc$parameters
hcp <- Mclust(x[sub], G = 3, modelNames = "V", verbose = FALSE)$parameters
t2 <- system.time(e2 <- em(modelName = "V", data = x, parameters = hcp))
cat(sprintf("R mclust em() alone from the subset fit (default tol 1e-5): %.1f ms elapsed, %d iterations, loglik %.4f\n",
            1000 * t2[["elapsed"]], attr(e2, "info")[["iterations"]], e2$loglik))
t3 <- system.time(e3 <- em(modelName = "V", data = x, parameters = hcp,
                           control = emControl(tol = c(1e-10, sqrt(.Machine$double.eps)))))
cat(sprintf("R mclust em() alone, tol 1e-10 (as tight as ours): %.1f ms elapsed, %d iterations, loglik %.4f | ours loglik %.4f\n",
            1000 * t3[["elapsed"]], attr(e3, "info")[["iterations"]], e3$loglik, o["mix_loglik"]))
