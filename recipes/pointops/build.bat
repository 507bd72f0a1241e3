:: Builds pointops into the host prefix on Windows (see build.sh for the variables used).
@echo on
setlocal EnableDelayedExpansion

:: nvcc needs 1-2 GB of memory per job: at most 4 jobs unless the caller set MAX_JOBS.
if "%MAX_JOBS%"=="" (
    set "MAX_JOBS=2"
    if defined CPU_COUNT set "MAX_JOBS=%CPU_COUNT%"
    if !MAX_JOBS! GTR 4 set "MAX_JOBS=4"
)
echo pointops build: MAX_JOBS=!MAX_JOBS!

if "%POINTOPS_CUDA%"=="1" (
    rem nvcc runs from the build prefix; the static CUDA runtime, cudart_static.lib from
    rem cuda-cudart-dev's dependencies, is linked from the host prefix.
    set "CUDA_HOME=%BUILD_PREFIX%\Library"
    set "POINTOPS_CUDA_TARGET_ROOT=%LIBRARY_PREFIX%"
    rem The arch list comes from ops-src's arch table; build.sh says why it is set explicitly.
    "%PYTHON%" "%RECIPE_DIR%\cuda_arch_list.py" pointops %cuda_compiler_version% %target_platform% --output arch_list.txt
    if errorlevel 1 exit 1
    set /p TORCH_CUDA_ARCH_LIST=<arch_list.txt
    del arch_list.txt
)

:: A source tree copied from a developer checkout may hold objects of another configuration.
if exist build rmdir /s /q build
for /d %%D in (*.egg-info) do rmdir /s /q "%%D"

:: setuptools compiles with the MSVC that vs2022_win-64 activated (the CRT then comes from the
:: vc14_runtime/ucrt conda packages, not from a system VC++ redistributable).
set DISTUTILS_USE_SDK=1

"%PYTHON%" -m pip install . -vv --no-deps --no-build-isolation
if errorlevel 1 exit 1
